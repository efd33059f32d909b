/**
 * broker/fronts/broker-api — the SPIFFE Broker API (`spiffe.broker.API`) on a Unix socket with
 * mTLS, for the node's data plane (ztunnel):
 *
 * - `BrokerApiService`: the four RPCs over the cache room's `NodePods`, `CertManager` and
 *   `TrustBundle` (caller checks, the workload reference, streams); `x509SvidResponse`.
 * - `startBrokerApiServer` + `SelfCertificateProvider`: the gRPC server, serving the broker's own
 *   SVID and trusting the bundle, with health and reflection on the same socket.
 * - `parseReference` / `encodePodReference` / `encodePidReference`: the workload reference in
 *   `google.protobuf.Any` (Kubernetes pod or PID; `spiffe.broker.*` and `spiffe.reference.*`).
 * - `WorkloadResolver`: a reference -> a pod of this node, with the per-kind caller allow-lists;
 *   `attestorPidResolver`: PID -> pod through the attestation room.
 * - `brokerApiErrorInfo`: the `google.rpc.ErrorInfo` every refusal carries.
 *
 * The wire contract (names, header, type URLs, message types) is src/protocol/spiffe-broker.ts.
 */
export { BrokerApiService, peerSvid, x509SvidResponse, type BrokerApiObserver, type BrokerApiOptions } from './broker-api.js';
export {
  SelfCertificateProvider,
  startBrokerApiServer,
  type BrokerApiServer,
  type BrokerApiServerOptions,
  type SelfCertificateProviderOptions,
} from './broker-api-server.js';
export { brokerApiErrorInfo } from './broker-api-errors.js';
export { brokerMessageType, brokerServiceDefinition } from './broker-proto.js';
export {
  describePodReference,
  encodePidReference,
  encodePodReference,
  parseReference,
  type PodReference,
  type WorkloadRef,
} from './workload-reference.js';
export { attestorPidResolver, WorkloadResolver, type PidResolver, type WorkloadResolverOptions } from './workload-resolver.js';
