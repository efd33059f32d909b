/**
 * broker — the node broker: one certificate per workload identity on the node, fetched from
 * the CA with the broker's own token (impersonation), served to the node's data plane over
 * the SPIFFE Broker API.
 *
 * - `startBroker(config)` / `readBrokerConfig({flags, env, logger})`: the whole daemon.
 * - `CertManager`: the certificate cache and scheduler (pure; `CaClient` interface, fake-clock tested).
 * - `refreshAt`, `backoff`, `retryDelay`: the refresh policy as pure functions.
 * - `ownSvidOf`: the own SVID's state (ready | expired | missing) for readiness and metrics.
 * - `IstioCaClient`: the CA client; `TokenSource`: the broker's own token.
 * - `NodePods`: the node's pods and their identities; `BrokerApiService`: the consumer API.
 * - `BrokerClient`: a Broker API client (fetch CLI, tests, benchmarks). Message types and names of
 *   the Broker API: src/protocol/spiffe-broker.ts.
 */
export { startBroker, type Broker } from './broker.js';
export { readBrokerConfig, defaultAllowedCallers, unixSocketPath, ENV, DEFAULTS, type BrokerConfig, type BrokerFlags } from './config.js';
export {
  CertManager,
  type AllCertsListener,
  type CertEvent,
  type CertListener,
  type CertManagerObserver,
  type CertState,
  type CertStateName,
  type IdentityStatus,
} from './cache/cert-manager.js';
export { refreshAt, backoff, backoffCeiling, retryDelay, DEFAULT_REFRESH_POLICY, type RefreshPolicy } from './cache/refresh-policy.js';
export { ownSvidOf, ownSvidProblem, type OwnSvid, type OwnSvidState } from './own-svid.js';
export { KeyedPriorityQueue, type FetchPriority } from './cache/priority-queue.js';
export { IstioCaClient, CaCallError, parseCaResponse, type TokenProvider } from './adapters/ca-client.js';
export { TokenSource, type FetchedToken, type TokenFetcher } from './adapters/token-source.js';
export { NodePods, type PodFacts, type TrackedPod } from './cache/node-pods.js';
export { BrokerApiService, x509SvidResponse } from './fronts/broker-api/broker-api.js';
export { BrokerClient, firstMessage, type ClientConstructor } from './client/broker-client.js';
export { splitDerCertificates } from '../pki/x509-fields.js';
export { TrustBundle } from './cache/trust-bundle.js';
export { BrokerError, type BrokerErrorCode } from './errors.js';
export { encodePodReference, parseWorkloadReference, type PodReference } from './fronts/broker-api/workload-reference.js';
export type { WorkloadCert, CaClient } from './cache/workload-cert.js';
export { brokerRbacObjects } from './adapters/rbac.js';
