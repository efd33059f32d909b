/**
 * How the Istio CA front authenticates its callers: the CA's own authenticator parts (src/ca,
 * through its index), assembled for one cluster — Kubernetes TokenReview with `spec.audiences`
 * (`istio-ca`), the token-shape check before any review, successful reviews cached by token hash
 * (never past the token's `exp`), refusals remembered briefly, concurrent reviews of one token
 * sharing a request. The caller's pod comes from TokenReview's `user.extra` pod-name / pod-uid.
 * Needs `tokenreviews` create (brokerRbacObjects).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import {
  AuthenticatorChain,
  DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS,
  kubeTokenReviewer,
  RefusalCache,
  TokenCache,
  TokenReviewAuthenticator,
  type Caller,
  type TokenCacheLookup,
} from '../../ca/index.js';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/log.js';
import type { Secret } from '../../core/secret.js';

/** Reviews remembered at most, by token hash (a node has few callers; the bound is against floods). */
const MAX_CACHED = 1024;

export interface CallerTokenReviewOptions {
  readonly kubeConfig: KubeConfig;
  /** The broker's cluster id (a label of the cache key, as in the CA). */
  readonly clusterId: string;
  readonly audiences: readonly string[];
  /** Successful reviews are reused this long (never past the token's exp); 0 = review every call. */
  readonly cacheSeconds: number;
  readonly clock: Clock;
  readonly logger: Logger;
  /** 'hit' | 'shared' | 'miss' | 'refused' | 'refresh', as the CA's `certbroker_ca_token_review_cache_total`. */
  readonly onLookup?: (result: TokenCacheLookup) => void;
}

export interface CallerAuthenticatorAdapter {
  authenticate(token: Secret<string>): Promise<Caller>;
}

export function tokenReviewCallerAuthenticator(options: CallerTokenReviewOptions): CallerAuthenticatorAdapter {
  const authenticator = new TokenReviewAuthenticator({
    clusterId: options.clusterId,
    audiences: options.audiences,
    reviewer: kubeTokenReviewer(options.kubeConfig),
    cache: new TokenCache({ clock: options.clock, ttlMs: options.cacheSeconds * 1000, maxEntries: MAX_CACHED }),
    refusals: new RefusalCache({ clock: options.clock, ttlMs: DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS * 1000, maxEntries: MAX_CACHED }),
    clock: options.clock,
    ...(options.onLookup ? { onCacheLookup: options.onLookup } : {}),
  });
  return new AuthenticatorChain([authenticator], options.logger);
}
