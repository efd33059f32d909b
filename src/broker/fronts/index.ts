/**
 * broker/fronts — how consumers reach the broker's certificates, one sub-room per API:
 *
 * - `broker-api/`: the SPIFFE Broker API for the node's data plane (ztunnel).
 * - `workload-api/`: the SPIFFE Workload API for every workload on the node, callers attested
 *   from the kernel (src/broker/attestation).
 * - `istio-ca/`: a node-local Istio CA (`CreateCertificate`) for released ztunnel.
 *
 * A front reads the cache room (certificates, pods, bundle) and may use
 * `adapters/unix-socket.ts` for its socket and `attestation/` to know its caller; it never calls
 * the CA or Kubernetes itself (it is handed what it needs), and fronts do not import one another
 * (how the two streaming fronts feed a stream from the cache is the cache's `stream-feed.ts`).
 */
export * from './broker-api/index.js';
export * from './workload-api/index.js';
export * from './istio-ca/index.js';
