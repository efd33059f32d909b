/**
 * broker/fronts/istio-ca — a node-local Istio CA (`istio.v1.auth.IstioCertificateService`) for
 * released ztunnel, which fetches its certificates with `CreateCertificate` from `CA_ADDRESS`
 * (docs/ztunnel.md):
 *
 * - `IstioCaFrontService`: authenticate the caller's token, authorize it and its
 *   `ImpersonatedIdentity` against this node's pods, forward the CSR to the CA as the broker,
 *   check and return the chain; istiod's status codes.
 * - `FrontAuthorizer` (pure): the node-local authorization; `CallerLimits` (pure): per-caller
 *   concurrency and rate.
 * - `FrontServingIdentity`: the front's TLS certificate (the broker's SVID with serving names).
 * - `startIstioCaFrontServer`: the TLS gRPC listener, with health and reflection.
 *
 * The CA client and the token reviewer are given to it (`CsrForwarder`, `CallerAuthenticator`):
 * a front calls neither the CA nor Kubernetes itself. The wire contract: src/protocol/istio-ca.ts.
 */
export {
  IstioCaFrontService,
  type CallerAuthenticator,
  type CsrForwarder,
  type FrontCallMetadata,
  type FrontOutcome,
  type IstioCaFrontObserver,
  type IstioCaFrontOptions,
} from './istio-ca-front.js';
export { FrontAuthorizer, type FrontAuthorizerOptions, type FrontCaller, type FrontGrant, type NodePodView } from './front-authorizer.js';
export { CallerLimits, type CallerLimitsOptions } from './caller-limits.js';
export { FrontServingIdentity, type FrontServingIdentityOptions } from './serving-identity.js';
export { startIstioCaFrontServer, type IstioCaFrontServer, type IstioCaFrontServerOptions, type IstioCaFrontTransport } from './istio-ca-front-server.js';
