/**
 * The Workload API front assembled (wiring): SO_PEERCRED through Perl, the real /proc anchored at
 * the node's cgroup root (learned from the broker's own cgroup), the attested connections, the
 * service over the broker's shared cache, the server on its socket.
 */
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import { cgroupAnchors, ConnectionAttestor, ownCgroup, PerlPeerCredentials, ProcessAttestor, procfsReader } from './attestation/index.js';
import type { CertManager, NodePods, TrustBundle } from './cache/index.js';
import { AttestedConnections, startWorkloadApiServer, WorkloadApiService, type WorkloadApiServer } from './fronts/index.js';
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
  readonly metrics: WorkloadApiMetrics;
}

export function startWorkloadApi(w: WorkloadApiWiring): Promise<WorkloadApiServer> {
  const attestor = new ConnectionAttestor({
    peers: new PerlPeerCredentials(),
    processes: new ProcessAttestor(procfsReader(), cgroupAnchors(ownCgroup())),
    observer: w.metrics.attestationObserver(),
  });
  const connections = new AttestedConnections(attestor);
  const service = new WorkloadApiService({
    pods: w.pods,
    certs: w.certs,
    bundle: w.bundle,
    callers: connections,
    clock: w.clock,
    rng: w.rng,
    logger: w.logger,
    updateJitterMs: w.updateJitterMs,
    observer: w.metrics.apiObserver(),
  });
  return startWorkloadApiServer({ socketPath: w.socketPath, service, connections, logger: w.logger });
}
