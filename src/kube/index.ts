/** Kubernetes adapters shared by the CA, the broker and install-cni (on @kubernetes/client-node). */
export { loadKubeConfig, IN_CLUSTER_SA_DIR } from './kubeconfig.js';
export type { LoadKubeConfigOptions } from './kubeconfig.js';
export { Informer, RESTART_REASONS } from './informer.js';
export type { InformerOptions, InformerHandlers, InformerStats, RestartReason, Selectors } from './informer.js';
export { INFORMER_DEFAULTS, INFORMER_ENV, STALE_AFTER_IDLE_WINDOWS, readInformerSettings } from './informer-settings.js';
export type { InformerSettings } from './informer-settings.js';
export { InformerMetrics } from './informer-metrics.js';
export type { ObservedInformer } from './informer-metrics.js';
export { createPodInformer } from './pod-informer.js';
export type { PodInformer, PodInformerOptions } from './pod-informer.js';
export { parseRetryAfter } from './api-request.js';
export { KubeApiError, KubeError } from './errors.js';
export type { KubeErrorCode } from './errors.js';
export {
  CSR_MIN_EXPIRATION_SECONDS,
  USAGE_CLIENT_AUTH,
  USAGE_DIGITAL_SIGNATURE,
  USAGE_KEY_ENCIPHERMENT,
  USAGE_SERVER_AUTH,
  CsrClient,
  createCsrInformer,
  csrCertificatePem,
  csrRequestPem,
  csrState,
  trueCondition,
  type CsrCondition,
  type CsrConditionType,
  type CsrObject,
  type CsrState,
} from './csr.js';
export { LeaderElector, ELECTOR_STOP_DEADLINE_MS } from './leader-elector.js';
export type { LeaderCallbacks, LeaderElectorOptions, LeadershipChange } from './leader-elector.js';
export { LEADER_ELECTION_DEFAULTS, LEADER_ELECTION_JITTER_FACTOR, leaderElectionProblems } from './leader-election-settings.js';
export type { LeaderElectionSettings } from './leader-election-settings.js';
export { LeaderMetrics } from './leader-metrics.js';
export type { ObservedElector } from './leader-metrics.js';
export { kubeLeaseClient, LEASE_REQUEST_TIMEOUT_MS } from './lease-client.js';
export type { LeaseClient, LeaseRecord, StoredLease } from './lease-client.js';
export { kubeRequest, readJson, type KubeRequestOptions } from './api-request.js';
export type { SignerNameInformerOptions } from './signer-name-informer.js';
export { PcrClient, createPcrInformer, pcrState, type PcrCondition, type PcrConditionType, type PcrObject, type PcrState } from './pcr.js';
