/**
 * broker/adapters — the broker's edges to the world outside the node's data plane:
 *
 * - `IstioCaClient`: the CA (Istio's `CreateCertificate` over gRPC+TLS), a `CaClient` of the
 *   cache room; `CaCallError` (the status says unreachable or refused); `parseCaResponse`.
 * - `CaForwarder`: the Istio CA front's forward of a caller's CSR to the CA, over the lean
 *   node:http2 client (src/grpc/h2-unary-channel.ts), answers checked by `checkForwardedChain`.
 * - `TokenSource` (the broker's own CA token, refreshed before it expires) and its fetchers:
 *   `tokenRequestFetcher` (TokenRequest bound to the broker's pod), `projectedTokenFileFetcher`.
 * - Kubernetes: `NodePodWatch` (this node's pods into `NodePods`), `kubePodLookup` / `podFacts`,
 *   `brokerRbacObjects` (exactly the permissions these need).
 * - `startRegistrationServer`: CNI pod registrations (`POST /cmdadd` on a Unix socket).
 * - `prepareSocketPath`: the owner-only directory and stale-socket removal every socket needs.
 * - `tokenReviewCallerAuthenticator`: the Istio CA front's callers, by TokenReview (the CA's
 *   authenticator, cache and refusal cache from src/ca).
 *
 * May import: the cache room, src/broker/errors.ts, src/core, src/pki, src/spiffe, src/kube,
 * src/grpc, src/ops, src/protocol, src/ca (its authenticators). Never fronts/, client/ or the wiring.
 */
export { CaCallError, IstioCaClient, parseCaResponse, type IstioCaClientOptions, type ParsedCaResponse, type TokenProvider } from './ca-client.js';
export { TokenSource, tokenRefreshDelay, type FetchedToken, type TokenFetcher, type TokenSourceOptions } from './token-source.js';
export { projectedTokenFileFetcher, TOKEN_REQUEST_TIMEOUT_MS, tokenRequestFetcher, type OwnPod } from './token-fetchers.js';
export { kubePodLookup, podFacts } from './pod-lookup.js';
export { NodePodWatch, watchedSidecarPodLookup, type NodePodWatchOptions } from './node-pod-watch.js';
export { brokerRbacObjects } from './rbac.js';
export {
  parseCniAddEvent,
  startRegistrationServer,
  type AmbientLookup,
  type AmbientPodView,
  type SidecarPodLookup,
  type PodLookup,
  type RegistrationObserver,
  type RegistrationServer,
  type RegistrationServerOptions,
} from './registration-server.js';
export { prepareSharedSocketPath, prepareSocketPath, SHARED_SOCKET_DIR_MODE, SHARED_SOCKET_MODE } from './unix-socket.js';
export { checkForwardedChain, type ForwardedChain } from './forwarded-chain.js';
export { CaForwarder, forwardRequestBytes, type CaForwarderOptions } from './ca-forwarder.js';
export { tokenReviewCallerAuthenticator, type CallerAuthenticatorAdapter, type CallerTokenReviewOptions } from './caller-token-review.js';
export { NamespaceWatch, watchedAmbientLookup } from './namespace-watch.js';
