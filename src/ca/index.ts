/**
 * ca — certbroker's CA server: Istio's `istio.v1.auth.IstioCertificateService` with TokenReview
 * / OIDC-JWT authentication, istiod-style node authorization for impersonation, and a
 * pluggable `Signer`.
 *
 * Programmatic start (used by `certbroker ca`, the broker's tests and the `npm start` stack):
 *
 *   const ca = await startCaServer({
 *     grpcHost: '127.0.0.1', grpcPort: 0, plaintext: false,
 *     trustDomain: 'cluster.local', servingDnsNames: ['localhost', '127.0.0.1'],
 *     defaultTtlSeconds: 86400, maxTtlSeconds: 7776000,
 *     trustedNodeAccounts: ['istio-system/ztunnel'],
 *     clusters: [{ id: 'Kubernetes', kubeConfig, audiences: ['istio-ca'], tokenReview: true }],
 *     defaultClusterId: 'Kubernetes',
 *     signer: { kind: 'self-signed', namespace: 'istio-system', secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 315360000 },
 *     tokenCacheSeconds: 60, signingWorkers: 2, shutdownGraceMs: 5000,
 *   });
 *   ca.port         // bound gRPC port (grpcPort 0 picks one)
 *   ca.rootsPem()   // PEM roots: trust these to reach the CA over TLS and to verify leaves
 *   ca.ready        // signer loaded, serving certificate presented, pod informers synced
 *   await ca.stop() // graceful (tryShutdown) within shutdownGraceMs, then forced
 *
 * Transport: with TLS, CreateCertificate and health Check are served directly on node:http2,
 * with grpc-js on loopback behind it for health Watch/List and reflection; plaintext (or
 * `transport: 'grpc-js'`) serves everything on grpc-js.
 *
 * With TLS (the default) `startCaServer` resolves once the signer is loaded and the serving
 * certificate is issued (its DNS/IP SANs are `servingDnsNames`); with `plaintext: true` (refused
 * unless `grpcHost` is a loopback address) it resolves at once and answers UNAVAILABLE until the
 * signer is ready.
 *
 * Parts (`startCaServer` only wires them): `createSigner` (signers/signer-factory.ts) builds the
 * `Signer` (signer.ts) — `SelfSignedSigner` (istio-ca-secret), `CacertsSigner` (plug-in cacerts
 * dir), `StepCaSigner` (a smallstep step-ca over its HTTP API), `IstioUpstreamSigner` (a
 * registration authority in front of an upstream Istio CA), `ModuleSigner` (an integrator's
 * `SignerModule`, signer-module.ts) or one given; `assembleClusters`
 * (cluster-auth.ts) the per-cluster `AuthenticatorChain`
 * (`TokenReviewAuthenticator`, `JwtAuthenticator`) and `NodeAuthorizer` over a `PodIndex`;
 * `ServingIdentity` the TLS certificate; `ReadinessGate` the event-driven readiness;
 * `startTransport` (transports.ts) the http2 or grpc-js transport; TTL rules in ttl.ts; errors in
 * errors.ts.
 */
export { startCaServer, type CaServer, type CaStartOptions } from './ca-server.js';
export { caServiceDefinition, startHttp2Server, startTransport, transportKind, MAX_MESSAGE_BYTES, type CaTransport, type Http2Server, type Http2ServerParts, type TransportKind, type TransportParts } from './transports.js';
export type { CreateCertificateHandler } from './h2-transport.js';
export { abortSignalOf, LazyCallAbort, type CallAbort, type CallSignal } from './call-signal.js';
export { createSigner, type SignerContext, type StartableSigner } from './signers/signer-factory.js';
export { assembleClusters, type CaClusters, type ClusterAuthSettings, type ClusterPodIndex } from './cluster-auth.js';
export { certChainFrame } from './h2-framing.js';
export {
  readCaConfig,
  ENV as CA_ENV,
  DEFAULT_AUDIENCES,
  DEFAULT_TRUSTED_NODE_ACCOUNTS,
  DEFAULT_SERVING_DNS_NAMES,
  SELF_SIGNED_SECRET_NAME,
  DEFAULT_SIGNING_WORKERS,
  DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS,
  DEFAULT_GRANTABLE_SERVING_NAMES,
  type CaServerConfig,
  type CaEnvConfig,
  type CaCliFlags,
  type ClusterConfig,
  type SignerConfig,
} from './config.js';
export type { Signer, SignRequest, PublicKeySignRequest, SignedChain, ServingCertificate } from './signer.js';
export { SelfSignedSigner, type SelfSignedSignerOptions } from './signers/self-signed-signer.js';
export { CacertsSigner, type CacertsSignerOptions } from './signers/cacerts-signer.js';
export { CacertsSecretSigner, type CacertsSecretSignerOptions } from './signers/cacerts-secret-signer.js';
export { StepCaSigner, STEP_CA_SERVING_TTL_SECONDS, type StepCaSignerOptions } from './signers/step-ca-signer.js';
export { StepCaClient, codeForStatus, parseSignAnswer, DEFAULT_STEP_CA_TIMEOUT_MS, STEP_CA_SIGN_PATH, type StepCaChain } from './signers/step-ca-client.js';
export { readProvisionerKey, signToken, STEP_CA_TOKEN_TTL_SECONDS, type ProvisionerKey } from './signers/step-ca-token.js';
export { STEP_CA_ENV, readStepCaSettings, type StepCaSettings, type StepCaFlags } from './signers/step-ca-config.js';
export { IstioUpstreamSigner, upstreamFailure, type UpstreamSignerOptions, type UpstreamSignerSettings } from './signers/upstream-signer.js';
export { checkWorkloadAnswer, checkServingAnswer } from './signers/upstream-answer.js';
export { ModuleSigner, type ModuleSignerOptions, type ModuleSignerSettings } from './signers/module-signer.js';
export { loadSignerModule } from './signers/module-loader.js';
export { DEFAULT_SIGNER_TIMEOUT_SECONDS, EXTERNAL_SIGNER_ENV, MODULE_SIGNER_PREFIX, type ExternalSigner } from './signers/external-signer-config.js';
export {
  SignerRefusal,
  isSignerRefusal,
  type CertificateData,
  type SignerModule,
  type SignerModuleContext,
  type SignerModuleRequest,
  type SignerModuleResult,
} from './signer-module.js';
export { MaterialSigner, inThreadIssuerFactory, type LeafIssuerFactory, type LeafIssuerBackend, type MaterialSignerOptions } from './signers/material-signer.js';
export { issueServingCertificate } from './serving-cert.js';
export { chainFromCsrAnswer, type CsrAnswerInput } from './signers/csr-answer.js';
export { ServingIdentity, SERVING_CERT_TTL_SECONDS, type ServingIdentityOptions, type ServingEvent } from './serving-identity.js';
export { poolIssuerFactory } from './signers/pool-issuer.js';
export {
  kubeCaSecretStore,
  CA_CERT_KEY,
  CA_KEY_KEY,
  CA_SECRET_TYPE,
  NEXT_CA_CERT_KEY,
  NEXT_CA_KEY_KEY,
  ROOT_CERT_KEY,
  type CaSecretStore,
  type StoredCa,
} from './signers/ca-secret-store.js';
export { applyRotationStep, describeStoredCa, rotationPhase, ROTATION_STEPS, type RotationPhase, type RotationStep } from './signers/root-rotation.js';
export { rotateStoredRoot } from './rotate-root.js';
export { RootsFile } from './signers/roots-file.js';
export { NodeAuthorizer, type NodeAuthorizerOptions } from './node-authorizer.js';
export { InMemoryPodIndex, type NodeAccountKey, type PodIndex, type PodInfo, type PodRef } from './pod-index.js';
export { PodInformer, toPodInfo } from './pod-informer.js';
export { CompactPodIndex } from './compact-pod-index.js';
export { NodeAccountCounts } from './node-account-counts.js';
export { RecentMap } from './recent-map.js';
export { CertificateService, MALFORMED_REQUEST, type ClusterAuth } from './certificate-service.js';
export { AuthenticatorChain, unverifiedJwtExpiryMs, type Authenticator } from './authn/authenticator.js';
export { TokenReviewAuthenticator, TOKEN_REVIEW_TIMEOUT_MS, callerFromReview, type TokenCacheLookup, type TokenReviewer, type TokenReviewResult } from './authn/token-review.js';
export { discoveredJwks, kubeCredentialsAllowedForOidc, oidcFetchOrigin } from './authn/oidc-discovery.js';
export { JwtAuthenticator, DEFAULT_JWT_ALGORITHMS, SUPPORTED_JWT_ALGORITHMS } from './authn/jwt-verifier.js';
export { TokenCache, tokenCacheKey } from './authn/token-cache.js';
export { kubeTokenReviewer } from './authn/kube-token-reviewer.js';
export { ServingNamesPolicy, parseServingNames } from './serving-names.js';
export { publicAuthError } from './errors.js';
export { RefusalCache, type Refusal } from './authn/refusal-cache.js';
export { jwtShapeProblem, MAX_TOKEN_BYTES } from './authn/token-shape.js';
export { DEFAULT_CA_LIMITS, resolveLimits, type CaLimits } from './limits.js';
export { DEFAULT_OVERLOAD_HINT, OverloadHint, type OverloadHintOptions } from './overload-hint.js';
export { resolveTtlSeconds, validityFor, type TtlPolicy } from './ttl.js';
export { CaError, authnError, type CaErrorCode, type CaAuthnCode, type StepCaErrorCode } from './errors.js';
export { AuthenticatedCaller, makeCaller, type Caller } from './caller.js';
export { CaMetrics, type ConnectionCloseReason, type StreamRefusalReason, type TransportStats } from './metrics.js';
export { ReadinessGate, caReadinessConditions, healthPublisher, type ReadinessCondition } from './readiness.js';
export { TrustBundlePublisher, type TrustBundlePublisherOptions } from './publish/trust-bundle-publisher.js';
export { DEFAULT_SKIP_NAMESPACES, DEFAULT_TRUST_BUNDLE_SIGNER_NAME, DEFAULT_PUBLISHER_LEASE, PUBLISH_ENV, type TrustBundlePublishConfig } from './publish/publish-config.js';
export { configMapUpdate, rootBundlePem, trustBundleInstallation, trustBundleName, trustBundleUpdate, ROOT_CONFIGMAP_NAME, TRUST_BUNDLE_INSTALLATION_LABEL, TRUST_BUNDLE_LABELS } from './publish/trust-bundle.js';
