/**
 * The `Signer` interface: the only thing the CA server knows about signing. Integrators add
 * signers (an HSM, a cloud CA, cert-manager) by implementing it. Two come with certbroker:
 * `SelfSignedSigner` (root persisted in the `istio-ca-secret` Secret) and `CacertsSigner`
 * (Istio's plug-in `cacerts` directory).
 */
import type { Secret } from '../core/secret.js';

export interface SignRequest {
  /** PEM PKCS#10 CSR; its signature must verify, its subject and SANs are ignored. */
  readonly csrPem: string;
  /** The one URI SAN the leaf carries. */
  readonly spiffeId: string;
  /** Lifetime wanted, already checked against the TTL policy. */
  readonly ttlSeconds: number;
  /**
   * DNS names and IP literals the leaf carries besides the URI SAN (the CA grants them only to
   * trusted node agents, for names on its allow-list: serving-names.ts). Absent or empty for
   * every workload leaf. A signer that cannot add them must refuse, not drop them: the broker
   * checks the leaf for them and refuses one without.
   */
  readonly servingNames?: readonly string[];
  /**
   * Aborted when the caller stops waiting (its gRPC deadline passed, it cancelled, the stream
   * closed). A signer that calls elsewhere (`cancellable`) gives that call up then; a local one
   * may ignore it. Absent when nobody can cancel.
   */
  readonly signal?: AbortSignal;
}

/** A leaf for a bare public key (no CSR): a Kubernetes PodCertificateRequest's. */
export interface PublicKeySignRequest {
  /** SubjectPublicKeyInfo DER. Possession was proven to someone the caller trusts (the API server). */
  readonly spkiDer: Uint8Array;
  readonly spiffeId: string;
  readonly ttlSeconds: number;
}

export interface SignedChain {
  /** Leaf first, then each intermediate one per element, root bundle last (may hold several roots). */
  readonly certChain: readonly string[];
  /** Hex serial and notAfter of the leaf, for logs. */
  readonly serialHex: string;
  readonly notAfterMs: number;
}

export interface Signer {
  /** What the signer is, for logs and /readyz ("self-signed", "cacerts:/etc/cacerts"). */
  readonly description: string;
  /** True once signing material is loaded and usable. */
  readonly ready: boolean;
  /** Why not ready (for /readyz), undefined when ready. */
  readonly notReadyReason: string | undefined;
  /**
   * Why the signer cannot sign again in this process (for /healthz, so the CA is restarted),
   * undefined while it can. Optional: a signer that always recovers leaves it out.
   */
  readonly brokenReason?: string | undefined;
  /**
   * True when `sign` honours `request.signal` (its work happens elsewhere and is worth stopping),
   * so the transports make one per call; absent or false: no signal is made (it costs per call).
   */
  readonly cancellable?: boolean;
  /** The PEM roots clients should trust (more than one during a root rotation). */
  roots(): readonly string[];
  /**
   * Issues a leaf for `request`. Throws a CertbrokerError: invalid-argument for a bad CSR,
   * unavailable when not ready, internal when signing fails.
   */
  sign(request: SignRequest): Promise<SignedChain>;
  /**
   * Issues a leaf for a bare public key, for `certbroker k8s-signer`'s PodCertificateRequests
   * (their pkixPublicKey). Optional: without it such requests fail with a reason; requests that
   * carry a stub CSR go through `sign`. Unsupported keys throw invalid-argument
   * (ERR_PKI_CSR_UNSUPPORTED_KEY).
   */
  signPublicKey?(request: PublicKeySignRequest): Promise<SignedChain>;
  /**
   * Issues a serving certificate for the CA itself (DNS SANs, no SPIFFE ID), with its own key.
   * Returns the chain (leaf first, intermediates, no roots) and the PEM key.
   */
  issueServingCertificate(request: { readonly dnsNames: readonly string[]; readonly ttlSeconds: number }): Promise<ServingCertificate>;
  /**
   * Registers a callback for material changes (rotation) and readiness changes (ready, not ready,
   * broken), so the CA's readiness and serving certificate follow the signer without polling;
   * returns an unsubscribe function. (A change not reported is seen at the next read.)
   */
  onChange(listener: () => void): () => void;
  /** Stops watchers and worker threads. */
  close(): Promise<void>;
}

export interface ServingCertificate {
  readonly certChainPem: string;
  readonly privateKeyPem: Secret<string>;
  readonly notAfterMs: number;
}
