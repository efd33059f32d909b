/**
 * broker/fronts/workload-api — the SPIFFE Workload API (`SpiffeWorkloadAPI`) on a node Unix socket,
 * for every SPIFFE workload on the node (go-spiffe, spiffe-helper, Envoy through spiffe-helper, and
 * ztunnel's own SVID), callers attested from the kernel (src/broker/attestation):
 *
 * - `WorkloadApiService`: FetchX509SVID / FetchX509Bundles streams over the cache room's
 *   `NodePods`, `CertManager` and `TrustBundle`; the JWT-SVID profile refused (UNIMPLEMENTED).
 * - `AttestedConnections`: each accepted connection's attestation, found by the call's peer tag.
 * - `ConnectionLimits`: connections and streams open at once, per caller (pod, or PID outside
 *   pods) and in total; past a bound the connection is closed at accept or the call answers
 *   RESOURCE_EXHAUSTED.
 * - `resolveCaller` / `stillCaller`: attestation -> pod of this node -> identity, or PERMISSION_DENIED.
 * - `startWorkloadApiServer`: the socket, plain gRPC through a connection injector, health, reflection.
 *
 * The wire contract (names, header, message types) is src/protocol/workload-api.ts.
 */
export { WorkloadApiService, workloadApiErrorInfo, type WorkloadApiObserver, type WorkloadApiOptions } from './workload-api.js';
export { WorkloadStream, x509BundlesResponse, x509SvidResponse as workloadX509SvidResponse, type WorkloadResponse, type WorkloadRpc } from './workload-stream.js';
export { AttestedConnections, type CallerLookup } from './attested-connections.js';
export {
  callerKey,
  ConnectionLimits,
  limitReached,
  podCallerKey,
  type ConnectionLimitsObserver,
  type Release,
  type WorkloadApiLimit,
  type WorkloadApiLimitsConfig,
} from './connection-limits.js';
export { notAttested, podOfProcess, resolveCaller, stillCaller, type WorkloadCaller } from './workload-caller.js';
export { startWorkloadApiServer, type WorkloadApiServer, type WorkloadApiServerOptions } from './workload-api-server.js';
export { workloadApiServiceDefinition } from './workload-api-proto.js';
