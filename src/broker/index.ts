/**
 * broker — the node broker: one certificate per workload identity on the node, fetched from
 * the CA with the broker's own token (impersonation), served to the node's data plane over
 * the SPIFFE Broker API. Its rooms (docs/architecture.md, "Node broker"):
 *
 * - `cache/`: the certificate manager, refresh policy, queue, node pods, trust bundle (pure);
 * - `fronts/`: how consumers reach the certificates (`broker-api/`: the SPIFFE Broker API;
 *   `istio-ca/`: a node-local Istio CA for released ztunnel);
 * - `adapters/`: the CA client, token source, Kubernetes (pod watch, lookups, RBAC), the CNI
 *   registration server, socket set-up;
 * - `client/`: the Broker API client and `certbroker fetch`;
 * - here: the wiring — `startBroker` and its parts (`OwnToken`, `OwnIdentity`, the workload
 *   certificates, `IstioCaFrontPart`, `BrokerReadiness`, the staged `Shutdown`), config, metrics, `runBroker` — and
 *   the errors every room uses.
 *
 * This file is the broker's surface for the rest of the project, its tests and benchmarks.
 */
export { startBroker, type Broker, type BrokerStartOptions } from './broker.js';
export {
  readBrokerConfig,
  defaultAllowedCallers,
  unixSocketPath,
  workloadEndpointPath,
  ENV,
  DEFAULTS,
  UPDATE_JITTER_RANGE_MS,
  type BrokerConfig,
  type BrokerFlags,
  type TokenSourceKind,
} from './config.js';
export {
  readWorkloadApiSettings,
  WORKLOAD_API_DEFAULTS,
  WORKLOAD_API_ENV,
  type PeerCredentialsSetting,
  type WorkloadApiLimits,
  type WorkloadApiSettings,
} from './workload-api-config.js';
export { ISTIO_CA_FRONT_DEFAULTS, ISTIO_CA_FRONT_ENV, readIstioCaFrontSettings, type IstioCaFrontConfig, type IstioCaFrontTransport } from './istio-ca-front-config.js';
export { ownSvidOf, ownSvidProblem, type OwnSvid, type OwnSvidState } from './own-svid.js';
export { OwnIdentity, type OwnIdentityOptions } from './own-identity.js';
export { OwnToken, ownTokenFetchers } from './own-token.js';
export { BrokerReadiness, type ReadinessSource } from './readiness.js';
export { Shutdown, type ShutdownStage, type Stopper } from './shutdown.js';
export { caClients, workloadCertManager } from './workload-certs.js';
export { BrokerMetrics } from './metrics.js';
export { BrokerError, isAbortError, type BrokerErrorCode } from './errors.js';
export * from './cache/index.js';
export * from './adapters/index.js';
export * from './fronts/index.js';
export * from './client/index.js';
export { splitDerCertificates, uriSans } from '../pki/x509-fields.js';
