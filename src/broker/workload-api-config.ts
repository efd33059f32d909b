/**
 * The Workload API's settings (docs/operations.md, "Node broker"): how SO_PEERCRED is read, and
 * the bounds on connections and streams, per caller (its pod; a process in no pod: its PID) and
 * for the whole socket. Read by `readBrokerConfig` when WORKLOAD_API_SOCKET is set.
 */
import type { ConfigReader } from '../core/config.js';

export const WORKLOAD_API_ENV = Object.freeze({
  PEER_CREDENTIALS: 'WORKLOAD_API_PEER_CREDENTIALS',
  MAX_CONNECTIONS: 'WORKLOAD_API_MAX_CONNECTIONS',
  MAX_CONNECTIONS_PER_CALLER: 'WORKLOAD_API_MAX_CONNECTIONS_PER_CALLER',
  MAX_STREAMS: 'WORKLOAD_API_MAX_STREAMS',
  MAX_STREAMS_PER_CALLER: 'WORKLOAD_API_MAX_STREAMS_PER_CALLER',
  IDLE_CONNECTION_SECONDS: 'WORKLOAD_API_IDLE_CONNECTION_SECONDS',
});

/**
 * `helper`: one long-lived Perl reads each connection's SO_PEERCRED, a Perl start per batch when it
 * cannot (the default); `batch`: always a Perl start per batch.
 */
export type PeerCredentialsSetting = 'helper' | 'batch';

export interface WorkloadApiLimits {
  /** Connections open at once on the socket; one more is closed at accept. */
  readonly maxConnections: number;
  /** Connections of one caller (pod, or PID outside pods); calls on one more answer RESOURCE_EXHAUSTED. */
  readonly maxConnectionsPerCaller: number;
  /** Streams open at once on the socket (FetchX509SVID, FetchX509Bundles). */
  readonly maxStreams: number;
  /** Streams of one caller. */
  readonly maxStreamsPerCaller: number;
}

export interface WorkloadApiSettings {
  readonly peerCredentials: PeerCredentialsSetting;
  readonly limits: WorkloadApiLimits;
  /**
   * A connection with no call open this long is closed (HTTP/2 GOAWAY; clients reconnect when they
   * call again), so a connection that holds a slot of the bounds and does nothing gives it back.
   */
  readonly idleConnectionSeconds: number;
}

export const WORKLOAD_API_DEFAULTS: WorkloadApiSettings = Object.freeze({
  peerCredentials: 'helper',
  // A node runs ~110 pods; a SPIFFE client holds one connection with one or two streams.
  limits: Object.freeze({ maxConnections: 1024, maxConnectionsPerCaller: 32, maxStreams: 2048, maxStreamsPerCaller: 64 }),
  idleConnectionSeconds: 300,
});

export interface WorkloadApiFlags {
  readonly workloadApiMaxConnections?: string;
  readonly workloadApiMaxConnectionsPerCaller?: string;
  readonly workloadApiMaxStreams?: string;
  readonly workloadApiMaxStreamsPerCaller?: string;
}

/** The settings; problems go to `r`. */
export function readWorkloadApiSettings(r: ConfigReader, flags: WorkloadApiFlags): WorkloadApiSettings {
  const E = WORKLOAD_API_ENV;
  const D = WORKLOAD_API_DEFAULTS.limits;
  const mode = r.string(E.PEER_CREDENTIALS, WORKLOAD_API_DEFAULTS.peerCredentials);
  if (mode !== 'helper' && mode !== 'batch') r.problem(`${E.PEER_CREDENTIALS}=${JSON.stringify(mode)} is not helper or batch`);
  const max = 1_000_000;
  const maxConnections = r.int(E.MAX_CONNECTIONS, D.maxConnections, { min: 1, max, explicit: flags.workloadApiMaxConnections });
  const maxConnectionsPerCaller = r.int(E.MAX_CONNECTIONS_PER_CALLER, D.maxConnectionsPerCaller, { min: 1, max, explicit: flags.workloadApiMaxConnectionsPerCaller });
  const maxStreams = r.int(E.MAX_STREAMS, D.maxStreams, { min: 1, max, explicit: flags.workloadApiMaxStreams });
  const maxStreamsPerCaller = r.int(E.MAX_STREAMS_PER_CALLER, D.maxStreamsPerCaller, { min: 1, max, explicit: flags.workloadApiMaxStreamsPerCaller });
  if (maxConnectionsPerCaller > maxConnections) r.problem(`${E.MAX_CONNECTIONS_PER_CALLER}=${maxConnectionsPerCaller} is above ${E.MAX_CONNECTIONS}=${maxConnections}`);
  const idleConnectionSeconds = r.int(E.IDLE_CONNECTION_SECONDS, WORKLOAD_API_DEFAULTS.idleConnectionSeconds, { min: 1, max: 86_400 });
  if (maxStreamsPerCaller > maxStreams) r.problem(`${E.MAX_STREAMS_PER_CALLER}=${maxStreamsPerCaller} is above ${E.MAX_STREAMS}=${maxStreams}`);
  return Object.freeze({
    peerCredentials: mode === 'batch' ? 'batch' : 'helper',
    limits: Object.freeze({ maxConnections, maxConnectionsPerCaller, maxStreams, maxStreamsPerCaller }),
    idleConnectionSeconds,
  });
}
