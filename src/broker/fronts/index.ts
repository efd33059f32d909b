/**
 * broker/fronts — how consumers reach the broker's certificates, one sub-room per API:
 *
 * - `broker-api/`: the SPIFFE Broker API for the node's data plane (ztunnel).
 *
 * (The SPIFFE Workload API and a node-local Istio CA front come next, each in a sub-room of its
 * own beside `broker-api/`.) A front reads the cache room (certificates, pods, bundle) and may
 * use `adapters/unix-socket.ts` for its socket; it never calls the CA or Kubernetes itself, and
 * fronts do not import one another.
 */
export * from './broker-api/index.js';
