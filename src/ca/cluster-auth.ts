/**
 * Per-cluster authentication and authorization, assembled from the configuration: for each
 * cluster the CA accepts callers from, a token cache and a negative cache (refusals by token
 * hash), the authenticator chain (TokenReview, then local JWT verification through OIDC
 * discovery; both run the token shape check first), and the node authorizer over a pod index fed
 * by the shared informer of src/kube. `CaClusters` owns the informers' lifecycle.
 */
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import { Secret } from '../core/secret.js';
import type { InformerSettings } from '../kube/informer-settings.js';
import { AuthenticatorChain, type Authenticator } from './authn/authenticator.js';
import { JwtAuthenticator } from './authn/jwt-verifier.js';
import { kubeTokenReviewer } from './authn/kube-token-reviewer.js';
import { discoveredJwks, originOf } from './authn/oidc-discovery.js';
import { RefusalCache } from './authn/refusal-cache.js';
import { TokenCache } from './authn/token-cache.js';
import { DEFAULT_MAX_CONCURRENT_TOKEN_REVIEWS, TokenReviewAuthenticator } from './authn/token-review.js';
import { ConcurrencyLimit } from '../core/concurrency-limit.js';
import type { ClusterAuth } from './certificate-service.js';
import type { ClusterConfig } from './config.js';
import type { CaMetrics } from './metrics.js';
import { NodeAuthorizer } from './node-authorizer.js';
import type { PodIndex } from './pod-index.js';
import { PodInformer } from './pod-informer.js';

/** Skew allowed on JWT time claims when verifying locally. */
const JWT_CLOCK_TOLERANCE_SECONDS = 10;
/** Authenticated tokens remembered per cluster. */
const MAX_CACHED_TOKENS = 50_000;
/** Refusals remembered per cluster (oldest first out): a flood of distinct forged tokens cannot grow it further. */
const MAX_REFUSALS = 10_000;

export interface ClusterAuthSettings {
  readonly trustDomain: string;
  readonly trustedNodeAccounts: readonly string[];
  readonly trustedRegistrationAuthorities?: readonly string[];
  readonly tokenCacheSeconds: number;
  readonly tokenNegativeCacheSeconds: number;
  /** One TokenReview's bound (default the reviewer's TOKEN_REVIEW_TIMEOUT_MS). */
  readonly tokenReviewTimeoutMs?: number;
  /** TokenReviews in flight at once per cluster (default DEFAULT_MAX_CONCURRENT_TOKEN_REVIEWS). */
  readonly maxConcurrentTokenReviews?: number;
  readonly informer?: InformerSettings;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: CaMetrics;
}

/** One cluster's pod index, by cluster id (readiness and tests). */
export interface ClusterPodIndex {
  readonly clusterId: string;
  readonly informer: PodInformer;
}

export interface CaClusters {
  /** What CertificateService looks a caller's `clusterid` up in. */
  readonly auth: ReadonlyMap<string, ClusterAuth>;
  readonly podIndexes: readonly ClusterPodIndex[];
  podIndex(clusterId: string): PodIndex | undefined;
  /** Starts every pod informer (list+watch in the background); aborting `signal` stops them. */
  start(signal?: AbortSignal): void;
  /** Stops the informers, each within `deadlineMs`. */
  stop(deadlineMs?: number): Promise<void>;
}

export function assembleClusters(clusters: readonly ClusterConfig[], settings: ClusterAuthSettings): CaClusters {
  const auth = new Map<string, ClusterAuth>();
  const podIndexes: ClusterPodIndex[] = [];
  for (const c of clusters) {
    const informer = new PodInformer({
      kubeConfig: c.kubeConfig,
      clock: settings.clock,
      logger: settings.logger.child({ cluster: c.id }),
      ...(settings.informer ? { settings: settings.informer } : {}),
    });
    settings.metrics.informers.track(informer.informer, { cluster: c.id });
    podIndexes.push({ clusterId: c.id, informer });
    auth.set(c.id, {
      id: c.id,
      authn: new AuthenticatorChain(authenticators(c, settings), settings.logger),
      authorizer: new NodeAuthorizer({ trustedNodeAccounts: settings.trustedNodeAccounts, trustedRegistrationAuthorities: settings.trustedRegistrationAuthorities ?? [], trustDomains: [settings.trustDomain], pods: informer }),
    });
  }
  return {
    auth,
    podIndexes,
    podIndex: (id) => podIndexes.find((p) => p.clusterId === id)?.informer,
    start: (signal) => {
      for (const p of podIndexes) p.informer.start(signal);
    },
    stop: async (deadlineMs) => {
      await Promise.all(podIndexes.map((p) => p.informer.stop(deadlineMs).catch(() => undefined)));
    },
  };
}

/** The cluster's authenticators in the order they are tried: TokenReview, then OIDC/JWKS. */
function authenticators(c: ClusterConfig, s: ClusterAuthSettings): Authenticator[] {
  const cache = new TokenCache({ clock: s.clock, ttlMs: s.tokenCacheSeconds * 1000, maxEntries: MAX_CACHED_TOKENS });
  const out: Authenticator[] = [];
  if (c.tokenReview) {
    const refusals = new RefusalCache({ clock: s.clock, ttlMs: s.tokenNegativeCacheSeconds * 1000, maxEntries: MAX_REFUSALS });
    out.push(
      new TokenReviewAuthenticator({
        clusterId: c.id,
        audiences: c.audiences,
        reviewer: kubeTokenReviewer(c.kubeConfig, s.tokenReviewTimeoutMs !== undefined ? { timeoutMs: s.tokenReviewTimeoutMs } : {}),
        cache,
        refusals,
        limit: new ConcurrencyLimit(s.maxConcurrentTokenReviews ?? DEFAULT_MAX_CONCURRENT_TOKEN_REVIEWS),
        clock: s.clock,
        onCacheLookup: (result) => (result === 'hit' ? s.metrics.cacheHit.inc() : s.metrics.tokenReviewCache.inc({ result })),
      }),
    );
  }
  if (c.oidc) out.push(jwtAuthenticator(c, c.oidc, cache, s.clock));
  return out;
}

function jwtAuthenticator(c: ClusterConfig, oidc: NonNullable<ClusterConfig['oidc']>, cache: TokenCache, clock: Clock): JwtAuthenticator {
  const user = c.kubeConfig.getCurrentUser();
  const kubeToken = oidc.useKubeCredentials && user?.token ? user.token : undefined;
  const origin = originOf(c.kubeConfig.getCurrentCluster()?.server ?? '');
  return new JwtAuthenticator({
    clusterId: c.id,
    issuer: oidc.issuer,
    audiences: c.audiences,
    algorithms: oidc.algorithms,
    keys: discoveredJwks({
      issuer: oidc.issuer,
      ...(oidc.discoveryUrl ? { discoveryUrl: oidc.discoveryUrl } : {}),
      ...(oidc.jwksUri ? { jwksUri: oidc.jwksUri } : {}),
      ...(oidc.caPem ? { caPem: oidc.caPem } : {}),
      // The CA's own token only ever goes to the API server's origin, whatever the discovery
      // document points at.
      ...(kubeToken ? { bearerToken: () => new Secret(kubeToken), ...(origin === undefined ? {} : { bearerTokenOrigin: origin }) } : {}),
    }),
    clock,
    cache,
    // Node clocks drift; accept iat/nbf/exp within a few seconds, as apiservers do.
    clockToleranceSeconds: JWT_CLOCK_TOLERANCE_SECONDS,
  });
}
