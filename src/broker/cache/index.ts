/**
 * broker/cache — what the broker holds and decides, as plain TypeScript over plain data (no
 * gRPC, Kubernetes or filesystem code; time and randomness injected):
 *
 * - `CertManager`: one certificate per workload identity — fetched through a `CaClient`,
 *   refreshed at half-life, retried with backoff, forgotten after its last pod; its state per
 *   identity is a `CertState` (pending | ready | failed | expired); events for listeners
 *   (`subscribe`, `subscribeAll`) and observers (metrics, logs), every call guarded.
 * - `refreshAt`, `refreshDelay`, `backoff`, `backoffCeiling`, `retryDelay`, `fetchFailureOf`,
 *   `fetchFailureInfoOf` (the CA's retry pushback too): the refresh policy as pure functions.
 * - `KeyedPriorityQueue`: realtime > warmup > background, one entry per key.
 * - `FetchSlots`: the keyed priority queue in front of at most `max` CA calls at once.
 * - `TimerQueue`, `ClockTimer`: every timer of the cache behind one clock sleep (a min-heap by due time).
 * - `NodePods`: this node's pods and the identity each needs; drives the manager.
 * - `TrustBundle`: the trust domain's roots, following the CA's (`follow`).
 * - `WorkloadCert` and helpers (`workloadCertPem`, `describeCert`, `isUsable`).
 * - `firstCertificate`, `pacedUpdates`, `sendableCert`, `heldSends`: how a front's stream is fed (first
 *   certificate, paced updates, only leaves the bundle verifies and whose root reached every stream).
 *
 * May import: src/core, src/pki, src/spiffe and src/broker/errors.ts. Nothing else of the broker.
 */
export { ClockTimer, TimerQueue } from './clock-timer.js';
export { FetchSlots } from './fetch-slots.js';
export {
  CertManager,
  type AllCertsListener,
  type CertEvent,
  type CertListener,
  type CertManagerObserver,
  type CertManagerOptions,
  type CertState,
  type CertStateName,
  type IdentityStatus,
} from './cert-manager.js';
export {
  backoff,
  backoffCeiling,
  DEFAULT_REFRESH_POLICY,
  fetchFailureInfoOf,
  fetchFailureOf,
  refreshAt,
  refreshDelay,
  retryDelay,
  type CertLifetime,
  type FetchFailure,
  type FetchFailureInfo,
  type RefreshPolicy,
} from './refresh-policy.js';
export { isMoreUrgent, KeyedPriorityQueue, type FetchPriority } from './priority-queue.js';
export {
  NodePods,
  type IdentityRetainer,
  type IneligiblePod,
  type NodePodsOptions,
  type PodEligibility,
  type PodFacts,
  type PodGoneListener,
  type PodGoneReason,
  type TrackedPod,
} from './node-pods.js';
export { TrustBundle, type BundleListener, type CertificateSource, type TrustBundleObserver, type TrustBundleOptions } from './trust-bundle.js';
export { describeCert, isUsable, svidMaterial, workloadCertPem, type CaClient, type WorkloadCert } from './workload-cert.js';
export { Waiters } from './waiters.js';
export { firstCertificate, heldSends, pacedUpdates, sendableCert } from './stream-feed.js';
