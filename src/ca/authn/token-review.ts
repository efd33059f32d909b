/**
 * Authentication by Kubernetes TokenReview (`spec.audiences` = the CA's audiences). Successful
 * reviews are cached by token hash for a short time and never past the token's `exp`
 * (istiod's one-review-per-CSR is a known source of apiserver throttling); concurrent reviews
 * of the same token share one request. Refusals are remembered for a shorter time (the
 * `RefusalCache`), and a token whose own `exp` has passed is refused as ERR_CA_TOKEN_EXPIRED
 * without a review: the API server would only say "not authenticated", never why.
 *
 * The review itself is a `TokenReviewer` function so this logic stays free of the Kubernetes
 * client; `kube-token-reviewer.ts` adapts @kubernetes/client-node.
 */
import type { Clock } from '../../core/clock.js';
import type { ConcurrencyLimit } from '../../core/concurrency-limit.js';
import type { Secret } from '../../core/secret.js';
import { makeCaller, parseServiceAccountUser, type Caller } from '../caller.js';
import { CaError, authnError, type CaAuthnCode } from '../errors.js';
import { requireAudiences, unverifiedJwtExpiryMs, type Authenticator } from './authenticator.js';
import type { RefusalCache } from './refusal-cache.js';
import { requireJwtShape } from './token-shape.js';
import { tokenCacheKey, type TokenCache } from './token-cache.js';

/** Default bound of one TokenReview (the CA's CA_TOKEN_REVIEW_TIMEOUT_SECONDS). */
export const TOKEN_REVIEW_TIMEOUT_MS = 5000;
/** Default TokenReviews in flight at once per cluster (the CA's CA_MAX_CONCURRENT_TOKEN_REVIEWS). */
export const DEFAULT_MAX_CONCURRENT_TOKEN_REVIEWS = 16;

export const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';
export const POD_UID_EXTRA = 'authentication.kubernetes.io/pod-uid';

export interface TokenReviewResult {
  readonly authenticated: boolean;
  readonly username?: string;
  readonly extra?: Readonly<Record<string, readonly string[]>>;
  readonly audiences?: readonly string[];
  readonly error?: string;
}

export type TokenReviewer = (token: Secret<string>, audiences: readonly string[]) => Promise<TokenReviewResult>;

/** What one authentication found in the caches (onCacheLookup; the CA's token review cache metric). */
export type TokenCacheLookup = 'hit' | 'shared' | 'miss' | 'refused' | 'refresh';

export interface TokenReviewAuthenticatorOptions {
  readonly clusterId: string;
  readonly audiences: readonly string[];
  readonly reviewer: TokenReviewer;
  readonly cache: TokenCache;
  /** Definite refusals, remembered briefly so a repeated bad token is not reviewed again. */
  readonly refusals?: RefusalCache;
  readonly clock: Clock;
  /**
   * For metrics: 'hit' (cached), 'shared' (joined a review in flight), 'miss' (a review was
   * sent), 'refused' (refused again from the refusal cache, no review), 'refresh' (a hit whose
   * entry nears its end: a review was sent in the background, TokenCache.refreshDue).
   */
  readonly onCacheLookup?: (result: TokenCacheLookup) => void;
  /**
   * Reviews of distinct tokens sent at once (the others wait their turn, FIFO; the reviewer's own
   * deadline starts when a review is sent). A fleet of brokers starting together otherwise sends
   * one review per broker at once: against a slow API server every one of them passes its
   * deadline, none is cached, and the retries start over (no progress at all).
   */
  readonly limit?: ConcurrencyLimit;
}

export class TokenReviewAuthenticator implements Authenticator {
  readonly kind = 'tokenreview' as const;
  readonly #o: TokenReviewAuthenticatorOptions;
  readonly #inflight = new Map<string, Promise<Caller>>();

  constructor(options: TokenReviewAuthenticatorOptions) {
    requireAudiences(options.audiences, `TokenReview authenticator for cluster ${options.clusterId}`);
    this.#o = options;
  }

  authenticate(token: Secret<string>): Promise<Caller> {
    let key: string;
    try {
      key = tokenCacheKey({ clusterId: this.#o.clusterId, token: token.reveal() });
      // One lookup for the verdict and its expiry (the refresh check needs both).
      const entry = this.#o.cache.entry(key);
      if (entry && entry.value.authenticator === this.kind) {
        const cached = entry.value;
        this.#o.onCacheLookup?.('hit');
        if (this.#o.cache.entryRefreshDue(entry) && !this.#inflight.has(key)) {
          this.#o.onCacheLookup?.('refresh');
          // The cached verdict stands until its own end; a failed refresh only means the next call after it reviews.
          this.#start(key, token, cached.expiresAtMs).catch(() => undefined);
        }
        // The hit (nearly every call) answers without an async frame of its own.
        return Promise.resolve(cached);
      }
    } catch (err) {
      return Promise.reject(err);
    }
    return this.#uncached(key, token);
  }

  /** Not in the cache: the refusal cache, the local checks, then a review (shared with whoever asks meanwhile). */
  async #uncached(key: string, token: Secret<string>): Promise<Caller> {
    const refused = this.#o.refusals?.get(key);
    if (refused) {
      this.#o.onCacheLookup?.('refused');
      throw authnError(refused.code, `${refused.message} (refused again from the refusal cache, no TokenReview sent)`);
    }
    // Local checks first (a cached token passed them when it was reviewed): not a JWT, or
    // expired by its own exp (read, not verified: only ever used to refuse or to bound caching).
    requireJwtShape(token.reveal());
    const expiresAtMs = unverifiedJwtExpiryMs(token.reveal());
    if (expiresAtMs !== undefined && expiresAtMs <= this.#o.clock.now()) {
      throw authnError('ERR_CA_TOKEN_EXPIRED', `token expired at ${new Date(expiresAtMs).toISOString()} (its exp claim; no TokenReview sent)`);
    }
    const pending = this.#inflight.get(key);
    if (pending) {
      this.#o.onCacheLookup?.('shared');
      return pending;
    }
    this.#o.onCacheLookup?.('miss');
    return this.#start(key, token, expiresAtMs);
  }

  /** One review of `token`, shared by whoever asks meanwhile; its verdict is cached (a refusal in the refusal cache). */
  #start(key: string, token: Secret<string>, expiresAtMs: number | undefined): Promise<Caller> {
    const p = this.#review(token, expiresAtMs)
      .then((caller) => {
        this.#o.cache.put(key, caller);
        return caller;
      })
      .catch((err: unknown) => {
        if (err instanceof CaError && err.status === 'unauthenticated') this.#o.refusals?.put(key, { code: err.code as CaAuthnCode, message: err.message });
        throw err;
      })
      .finally(() => this.#inflight.delete(key));
    this.#inflight.set(key, p);
    return p;
  }

  async #review(token: Secret<string>, expiresAtMs: number | undefined): Promise<Caller> {
    let result: TokenReviewResult;
    try {
      const { reviewer, audiences, limit } = this.#o;
      result = await (limit ? limit.run(() => reviewer(token, audiences)) : reviewer(token, audiences));
    } catch (err) {
      if (err instanceof CaError) throw err;
      throw authnError('ERR_CA_AUTHN_BACKEND', 'TokenReview request failed', err);
    }
    return callerFromReview(result, {
      clusterId: this.#o.clusterId,
      audiences: this.#o.audiences,
      nowMs: this.#o.clock.now(),
      expiresAtMs,
    });
  }
}

/** Pure: a TokenReview status to a Caller, or the reason it is not one. */
export function callerFromReview(
  result: TokenReviewResult,
  context: { readonly clusterId: string; readonly audiences: readonly string[]; readonly nowMs: number; readonly expiresAtMs: number | undefined },
): Caller {
  // First: a token that expired (by its own exp) before the answer came is refused as expired,
  // whatever the API server said — it does not say why it refuses ("invalid bearer token").
  if (context.expiresAtMs !== undefined && context.expiresAtMs <= context.nowMs) {
    throw authnError('ERR_CA_TOKEN_EXPIRED', `token expired at ${new Date(context.expiresAtMs).toISOString()}`);
  }
  if (!result.authenticated) {
    throw authnError('ERR_CA_TOKEN_INVALID', `TokenReview: not authenticated${result.error ? ` (${result.error})` : ''}`);
  }
  // We send spec.audiences; an audience-aware apiserver answers with the ones the token is valid
  // for. An empty or missing status.audiences means the token is valid for the apiserver's own
  // audience only (a backend that ignored spec.audiences): not a token for us. With no audience
  // of our own configured, the review would have been for the apiserver's audience: refuse.
  if (context.audiences.length === 0) {
    throw authnError('ERR_CA_TOKEN_AUDIENCE', 'TokenReview: the CA has no audience configured, so no token can be for it');
  }
  const granted = result.audiences ?? [];
  if (!granted.some((a) => context.audiences.includes(a))) {
    const said = granted.length > 0 ? granted.join(',') : '(none: the apiserver audience)';
    throw authnError('ERR_CA_TOKEN_AUDIENCE', `TokenReview: token audiences ${said} do not include ${context.audiences.join(',')}`);
  }
  const sa = parseServiceAccountUser(result.username ?? '');
  if (!sa) throw authnError('ERR_CA_TOKEN_NOT_SERVICE_ACCOUNT', `TokenReview: user ${JSON.stringify(result.username ?? '')} is not a service account`);
  const podName = result.extra?.[POD_NAME_EXTRA]?.[0];
  const podUid = result.extra?.[POD_UID_EXTRA]?.[0];
  return makeCaller({ namespace: sa.namespace, serviceAccount: sa.serviceAccount, podName, podUid, clusterId: context.clusterId, authenticator: 'tokenreview', expiresAtMs: context.expiresAtMs });
}
