/**
 * `certbroker k8s-signer`: a SPIFFE signer controller for Kubernetes. It signs, with a plug-in CA,
 * the requests of the Kubernetes certificate APIs for its signerName: CertificateSigningRequests
 * (csr-controller.ts, policy in csr-policy.ts) and PodCertificateRequests (pcr-controller.ts, policy
 * in pcr-policy.ts), on core/work-queue.ts's WorkQueue. The wiring (k8s-signer.ts) runs one controller per
 * API (controller.ts says what a controller is and gets).
 */
export { startK8sSigner, CONTROLLERS, K8S_SIGNER_STOP_DEADLINE_MS, type K8sSigner, type K8sSignerOptions } from './k8s-signer.js';
export { readK8sSignerConfig, K8S_SIGNER_ENV, CONTROLLER_NAMES, DEFAULT_CONTROLLERS, DEFAULT_SERVING_REQUESTERS, type ControllerName, type K8sSignerConfig, type K8sSignerFlags } from './config.js';
export type { HandleOutcome, SignerController, SignerControllerContext, SignerControllerFactory } from './controller.js';
export { CsrController, csrController, CSR_CONTROLLER } from './csr-controller.js';
export { judgeCsr, SVID_USAGES, SERVING_USAGES, type CsrPolicy, type CsrRefusalReason, type CsrRequestFacts, type CsrVerdict } from './csr-policy.js';
export { SignerMetrics, type SignerOutcome } from './metrics.js';
export { PcrController, pcrController, PCR_CONTROLLER } from './pcr-controller.js';
export { judgePcr, beginRefreshAtMs, SUPPORTED_KEY_TYPES, SUGGESTED_KEY_TYPE, type PcrFacts, type PcrRefusalReason, type PcrVerdict } from './pcr-policy.js';
