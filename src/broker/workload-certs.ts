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
