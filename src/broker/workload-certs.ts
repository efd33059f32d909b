/**
 * The workload side of the broker's CA use: the two CA clients (impersonating for workloads,
 * plain for the broker's own SVID) with the same address, roots, token and cluster, and the
 * workload certificate manager with its observers — metrics, and the log lines operators read.
 */
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import { IstioCaClient, type IstioCaClientOptions, type TokenProvider } from './adapters/ca-client.js';
import { CertManager } from './cache/cert-manager.js';
import { fetchFailureOf } from './cache/refresh-policy.js';
import { describeCert } from './cache/workload-cert.js';
import type { BrokerConfig } from './config.js';
import type { BrokerMetrics } from './metrics.js';
import type { TrustBundle } from './cache/trust-bundle.js';
import { certificateToPem, parsePem } from '../pki/pem.js';

/** What every broker CA client shares: address, roots, TLS name, the broker's token, cluster id, TTL. */
export function caClientBase(config: BrokerConfig, tokens: TokenProvider): Omit<IstioCaClientOptions, 'impersonate' | 'servingNames'> {
  return {
    address: config.ca.address,
    caRootsPem: config.ca.rootsPem,
    ...(config.ca.tlsServerName ? { tlsServerName: config.ca.tlsServerName } : {}),
    tokens,
    clusterId: config.ca.clusterId,
    certTtlSeconds: config.ca.certTtlSeconds,
  };
}

/**
 * Keeps `clients` verifying the CA's serving certificate against the configured roots plus the
 * trust bundle's (which follows the roots in the CA's authenticated answers), so a root rotation
 * at the CA does not cut the broker off when the CA's serving certificate moves to the new root.
 * Returns the unsubscription.
 */
export function caTrustFollowsBundle(bundle: TrustBundle, configuredRootsPem: string, clients: readonly { trustRoots(rootsPem: string): void }[]): () => void {
  const apply = () => {
    const pem = unionPem(configuredRootsPem, bundle.pem);
    for (const c of clients) c.trustRoots(pem);
  };
  apply();
  return bundle.onChange(apply);
}

function unionPem(...texts: string[]): string {
  const seen = new Set<string>();
  let out = '';
  for (const b of texts.flatMap((t) => parsePem(t)).filter((b) => b.type === 'CERTIFICATE')) {
    const der = Buffer.from(b.der);
    if (seen.has(der.toString('base64'))) continue;
    seen.add(der.toString('base64'));
    out += certificateToPem(der);
  }
  return out;
}

/** The CA client for workload identities (ImpersonatedIdentity) and the one for the broker's own. */
export function caClients(config: BrokerConfig, tokens: TokenProvider): { readonly workloads: IstioCaClient; readonly own: IstioCaClient } {
  const base = caClientBase(config, tokens);
  return { workloads: new IstioCaClient({ ...base, impersonate: true }), own: new IstioCaClient({ ...base, impersonate: false }) };
}

/** The manager of the node's workload certificates, observed by the metrics and the log. */
export function workloadCertManager(
  config: BrokerConfig,
  deps: { readonly ca: IstioCaClient; readonly clock: Clock; readonly rng: Rng; readonly logger: Logger; readonly metrics: BrokerMetrics },
): CertManager {
  const { logger } = deps;
  return new CertManager({
    ca: deps.ca,
    clock: deps.clock,
    rng: deps.rng,
    logger,
    maxConcurrentFetches: config.maxConcurrentFetches,
    forgetGraceMs: config.forgetGraceMs,
    observer: [
      deps.metrics.certObserver(),
      {
        fetchFailed: (identity, err, _ms, next) =>
          logger.warn('certificate fetch failed', { identity, err: describeError(err), failure: fetchFailureOf(err), retryInMs: Math.round(next) }),
        expired: (_identity, cert) => logger.warn('certificate expired; not served until renewed', describeCert(cert)),
      },
    ],
  });
}
