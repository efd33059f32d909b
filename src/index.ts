/**
 * certbroker's public API for integrators: the package entry, what the module specifier
 * `certbroker` resolves to.
 *
 * - Run the CA in your own process: `readCaConfig` (flags/env -> settings), `startCaServer`, with
 *   a signer of yours (`{ kind: 'custom', signer }`) implementing `Signer`.
 * - Run the node broker: `readBrokerConfig`, `startBroker`.
 * - Write a signer module (`--signer module:<path-or-package>`): a default export implementing
 *   `SignerModule` — given a validated identity, key and TTL, return the chain; throw
 *   `SignerRefusal` to refuse. The CA checks the result. See docs/ca.md, "Signer modules".
 * - Write a `Signer`: the request/result types, `CaError` to refuse, and the PKI helpers that
 *   build a chain the way the built-in signers do (`createRootCa`, `createIntermediateCa`,
 *   `caKeyMaterial`, `FastLeafIssuer`, `responseChainPems`, `issueServingCertificate`) — or extend
 *   `MaterialSigner`, which holds `CaKeyMaterial` and does the rest. See docs/ca.md, "Writing a
 *   signer", for a complete module.
 * - Errors: everything certbroker throws on purpose is a `CertbrokerError` with a stable `code`
 *   (the `*ErrorCode` unions below) and a `status` saying how a server answers it.
 *
 * Importing this module loads the CA and the broker (and @kubernetes/client-node); the CLI
 * (`certbroker`, bin) and the CNI executables do not go through it. Anything not exported here is
 * internal and may change without notice. Types come with the package (`dist/src/index.d.ts`).
 */

// The CA server.
export { startCaServer, readCaConfig, CA_ENV } from './ca/index.js';
export { CA_PROTO, CA_SERVICE } from './protocol/istio-ca.js';
export type { CaServer, CaServerConfig, CaEnvConfig, CaCliFlags, ClusterConfig, SignerConfig } from './ca/index.js';

// Signers: the interface, the built-in implementations and what a custom signer needs.
export type { Signer, SignRequest, PublicKeySignRequest, SignedChain, ServingCertificate } from './ca/index.js';
export { MaterialSigner, SelfSignedSigner, CacertsSigner, issueServingCertificate } from './ca/index.js';
export type { SelfSignedSignerOptions, CacertsSignerOptions } from './ca/index.js';

// Signer modules (`certbroker ca --signer module:<path-or-package>`): what the module's default export implements.
export { SignerRefusal, loadSignerModule } from './ca/index.js';
export type { SignerModule, SignerModuleRequest, SignerModuleResult, SignerModuleContext, CertificateData } from './ca/index.js';

// The node broker.
export { startBroker, readBrokerConfig, ENV as BROKER_ENV } from './broker/index.js';
export type { Broker, BrokerConfig, BrokerFlags } from './broker/index.js';

// PKI helpers: keys, CSRs, CA certificates, the istiod leaf profile, chains.
export {
  generateKeyPair,
  createCsr,
  parseCsr,
  createRootCa,
  createIntermediateCa,
  caKeyMaterial,
  responseChainPems,
  rootBundlePem,
  FastLeafIssuer,
  verifyChain,
  parseCertificates,
  parseResponseChain,
  certificateToPem,
  loadCaCertsDir,
} from './pki/index.js';
export type {
  KeyPair,
  KeySpec,
  Csr,
  VerifiedCsr,
  CaCertificate,
  CreateCaOptions,
  Issuer,
  CaKeyMaterial,
  CaKeyMaterialInput,
  FastLeafIssuerOptions,
  IssuedLeaf,
  LeafRequest,
  ResponseChain,
  VerifyChainInput,
} from './pki/index.js';

// Errors: one hierarchy, closed codes per domain.
export { CertbrokerError, isCertbrokerError, describeError } from './core/errors.js';
export type { ErrorStatus, CertbrokerErrorOptions } from './core/errors.js';
export { ConfigError } from './core/config.js';
export { CaError, type CaErrorCode } from './ca/index.js';
export { BrokerError, type BrokerErrorCode } from './broker/index.js';
export { PkiError, type PkiErrorCode } from './pki/index.js';
export { SpiffeError, type SpiffeErrorCode } from './spiffe/index.js';
export { KubeError, type KubeErrorCode } from './kube/index.js';

// What the start functions take besides their settings.
export { loadKubeConfig, type LoadKubeConfigOptions } from './kube/index.js';
export { Secret } from './core/secret.js';
export { createLogger, silentLogger, type Logger, type LoggerOptions, type LogLevel } from './core/log.js';
export { systemClock, type Clock } from './core/clock.js';
