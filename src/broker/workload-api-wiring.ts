/**
 * The Workload API front assembled (wiring): SO_PEERCRED through the long-lived Perl helper (the
 * Perl-per-batch way as its fallback), the real /proc anchored at the node's cgroup root (learned
 * from the broker's own cgroup), the attested connections, the service over the broker's shared
 * cache, the server on its socket. The helper's mode, exits and fallbacks are logged and counted.
 */
import type { Clock } from '../core/clock.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import {
  ConnectionAttestor,
  nodeProcessAttestor,
  PeerCredentialsHelper,
  PeerCredentialsWithFallback,
  PerlPeerCredentials,
} from './attestation/index.js';
import type { CertManager, NodePods, TrustBundle } from './cache/index.js';
import { AttestedConnections, ConnectionLimits, startWorkloadApiServer, WorkloadApiService, type WorkloadApiServer } from './fronts/index.js';
import type { WorkloadApiSettings } from './workload-api-config.js';
import type { WorkloadApiMetrics } from './workload-api-metrics.js';

export interface WorkloadApiWiring {
  readonly socketPath: string;
  readonly pods: NodePods;
  readonly certs: CertManager;
  readonly bundle: TrustBundle;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  readonly updateJitterMs: number;
  readonly settings: WorkloadApiSettings;
  readonly metrics: WorkloadApiMetrics;
}

/** SO_PEERCRED for the Workload API: the helper first, the batch Perl when it cannot serve. */
function workloadPeerCredentials(w: Pick<WorkloadApiWiring, 'logger' | 'metrics' | 'clock' | 'settings'>): PeerCredentialsWithFallback {
  const log = w.logger.child({ part: 'workload-api-attestation' });
  const throttle = new LogThrottle({ logger: log, clock: w.clock, intervalMs: 10_000 });
  const helper = new PeerCredentialsHelper({
    observer: {
      exited: (reason, held) => {
        w.metrics.helperExits.inc();
        throttle.log('warn', 'helper-exit', 'SO_PEERCRED helper ended; the next connection starts another', { reason, held });
      },
    },
  });
  return new PeerCredentialsWithFallback(helper, new PerlPeerCredentials(), {
    ...(w.settings.peerCredentials === 'batch' ? { helperDisabled: 'configured off (WORKLOAD_API_PEER_CREDENTIALS=batch)' } : {}),
    observer: {
      mode: (mode, reason) => {
        w.metrics.peerCredentialsModeIs(mode);
        if (mode === 'helper') log.info('Workload API reads SO_PEERCRED through a long-lived Perl helper', { mode });
        else log.warn('Workload API SO_PEERCRED helper unavailable; a Perl process per batch of connections reads it instead', { mode, reason });
      },
      fellBack: (reason) => {
        w.metrics.fallbackReads.inc();
        throttle.log('warn', 'fallback', 'SO_PEERCRED helper failed a connection; read by a Perl process instead', { reason });
      },
    },
  });
}

/** The connection and stream bounds, refusals counted and logged (throttled per bound). */
function workloadApiLimits(w: Pick<WorkloadApiWiring, 'logger' | 'metrics' | 'clock' | 'settings'>): ConnectionLimits {
  const throttle = new LogThrottle({ logger: w.logger.child({ part: 'workload-api' }), clock: w.clock, intervalMs: 10_000 });
  const limits = new ConnectionLimits(w.settings.limits, {
    limited: (limit, caller, detail) => {
      w.metrics.limited.inc({ limit });
      throttle.log('warn', limit, limit === 'connections' ? 'Workload API connection closed at accept: bound reached' : 'Workload API call refused (RESOURCE_EXHAUSTED): bound reached', {
        limit,
        ...(caller === undefined ? {} : { caller }),
        detail,
      });
    },
  });
  w.metrics.countConnections(() => limits.held().connections);
  return limits;
}

export function startWorkloadApi(w: WorkloadApiWiring): Promise<WorkloadApiServer> {
  const limits = workloadApiLimits(w);
  const attestor = new ConnectionAttestor({
    peers: workloadPeerCredentials(w),
    processes: nodeProcessAttestor(),
    observer: w.metrics.attestationObserver(),
  });
  const connections = new AttestedConnections(attestor, limits);
  const service = new WorkloadApiService({
    pods: w.pods,
    certs: w.certs,
    bundle: w.bundle,
    callers: connections,
    clock: w.clock,
    rng: w.rng,
    logger: w.logger,
    updateJitterMs: w.updateJitterMs,
    limits,
    observer: w.metrics.apiObserver(),
  });
  return startWorkloadApiServer({ socketPath: w.socketPath, service, connections, logger: w.logger, idleConnectionMs: w.settings.idleConnectionSeconds * 1000 });
}
