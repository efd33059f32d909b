/**
 * The CA's CreateCertificate handler assembled in process the way ca-server.ts wires it, for the
 * benchmarks that call `CertificateService.createCertificate` directly (no TLS, no HTTP/2): the
 * self-signed signer on 2 signing workers (its root kept in a Secret of the given cluster), the
 * cluster's TokenReview authenticator chain with its token cache, and services over a clusters
 * map (the assembly's own, or one the caller built from its parts).
 *
 * The CA module is a parameter so that bench:ca-calls can hand in another build's dist.
 */
import type { ClusterAuth, ClusterConfig, CaClusters, CaMetrics, CertificateService } from '../src/ca/index.js';
import type { Clock } from '../src/core/clock.js';
import type { Logger } from '../src/core/log.js';
import type { IstioCertificateRequest } from '../src/protocol/istio-ca.js';

type CaModule = typeof import('../src/ca/index.js');

export const TRUST_DOMAIN = 'cluster.local';

export interface InProcessCa {
  /** The assembly of `cluster`: its authenticator chain and node authorizer (its informer is not started here). */
  readonly clusters: CaClusters;
  /** The metrics the assembly and every service() count into. */
  readonly metrics: CaMetrics;
  /** A CertificateService over `auth` (default the assembly's own), sharing this signer and metrics. */
  service(auth?: ReadonlyMap<string, ClusterAuth>): CertificateService;
  /** Stops the assembly's informers (if started) and the signer's workers. */
  close(): Promise<void>;
}

/** Signer started (its root created or read, in `cluster`), `cluster` and `more` assembled (each its own authenticator chain and token cache); `signingWorkers` default 2. */
export async function startInProcessCa(
  ca: CaModule,
  cluster: ClusterConfig,
  o: { clock: Clock; logger: Logger; signingWorkers?: number; tokenCacheSeconds?: number; more?: readonly ClusterConfig[] },
): Promise<InProcessCa> {
  const { clock, logger } = o;
  const metrics = new ca.CaMetrics();
  const settings = { trustDomain: TRUST_DOMAIN, maxTtlSeconds: 7 * 86_400, signingWorkers: o.signingWorkers ?? 2, defaultCluster: cluster, clock, logger };
  const { signer, start } = ca.createSigner({ kind: 'self-signed', namespace: 'istio-system', secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 86_400 * 365 }, settings);
  const clusters = ca.assembleClusters([cluster, ...(o.more ?? [])], {
    trustDomain: TRUST_DOMAIN,
    trustedNodeAccounts: ['istio-system/ztunnel'],
    tokenCacheSeconds: o.tokenCacheSeconds ?? 60,
    tokenNegativeCacheSeconds: 5,
    clock,
    logger,
    metrics,
  });
  await start();
  return {
    clusters,
    metrics,
    service: (auth = clusters.auth) =>
      new ca.CertificateService({
        trustDomain: TRUST_DOMAIN,
        clusters: auth,
        defaultClusterId: cluster.id,
        signer: () => signer,
        ttl: { defaultTtlSeconds: 86_400, maxTtlSeconds: 7 * 86_400, backdateSeconds: 120 },
        clock,
        metrics,
        logger,
        maxCsrBytes: 64 * 1024,
      }),
    close: async () => {
      await clusters.stop();
      await signer.close();
    },
  };
}

/** A decoded IstioCertificateRequest as the transports hand it over, impersonating `identity`. */
export function impersonatingRequest(csr: string, identity: string): IstioCertificateRequest {
  return { csr, validity_duration: 3600, metadata: { fields: { ImpersonatedIdentity: { kind: 'stringValue', stringValue: identity } } } };
}

/** The call's headers behind `get`, as the transports pass them: the bearer token and the gRPC ones. */
export function bearerMetadata(token: string): { get(key: string): string[] } {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/grpc', te: 'trailers' };
  return { get: (key: string) => (headers[key] === undefined ? [] : [headers[key]]) };
}
