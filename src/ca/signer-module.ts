/**
 * The contract of a signer module (`certbroker ca --signer module:<path-or-package>`): an ES
 * module whose default export is a `SignerModule`. The CA does everything around it — it
 * authenticates and authorizes the caller, verifies the CSR (its signature: proof of
 * possession), applies the TTL policy — and hands the module only what to certify: the
 * identity, the public key, the lifetime and an AbortSignal. It checks what comes back (an
 * X509-SVID for that identity and key that chains to the roots the module returned) before any
 * caller sees it. Exported from the package entry (src/index.ts); docs/ca.md, "Signer modules",
 * has a complete module (examples/signer-module.mjs).
 */
import type { KeyObject } from 'node:crypto';

/** A certificate (or several, for `roots`) as PEM text or as DER bytes. */
export type CertificateData = string | Uint8Array;

export interface SignerModuleRequest {
  /**
   * 'workload': an X509-SVID for `spiffeId` (the CA's answer to CreateCertificate).
   * 'serving': the CA's own TLS certificate (`dnsNames`/`ipAddresses` SANs, serverAuth, no URI SAN).
   */
  readonly purpose: 'workload' | 'serving';
  /** The one URI SAN the leaf must carry (workload); undefined for 'serving'. */
  readonly spiffeId: string | undefined;
  /**
   * DNS SANs. For 'serving' the CA's serving names; for 'workload' names a trusted node agent
   * was granted on its own SVID (usually empty; a module that cannot add them must refuse).
   */
  readonly dnsNames: readonly string[];
  /** IP SANs, as `dnsNames`. */
  readonly ipAddresses: readonly string[];
  /** The key to certify (the CSR's, its signature already verified). */
  readonly publicKey: KeyObject;
  /** The same key as SubjectPublicKeyInfo DER. */
  readonly spkiDer: Uint8Array;
  /** Lifetime wanted, already within the CA's policy; issuing shorter is fine, longer is not. */
  readonly ttlSeconds: number;
  /** Fired when the CA stops waiting (its deadline passed, or it shuts down): stop work and reject. */
  readonly signal: AbortSignal;
}

export interface SignerModuleResult {
  /** The leaf (one certificate). */
  readonly leaf: CertificateData;
  /** Intermediates from the leaf's issuer upwards (one certificate per entry); empty or absent when a root signed the leaf. */
  readonly intermediates?: readonly CertificateData[];
  /** The roots clients trust (one or more: several during a root rotation); the leaf must chain to one. */
  readonly roots: readonly CertificateData[];
}

/** What `start` receives. */
export interface SignerModuleContext {
  /** Aborted when the CA stops (before `close`). */
  readonly signal: AbortSignal;
  /** Call when the module's roots or readiness changed, so the CA re-reads them at once. */
  changed(): void;
  /** The CA's structured logger (JSON lines on stderr; never log keys). */
  readonly log: (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;
}

export interface SignerModule {
  /** For logs and /readyz; default the module's specifier. */
  readonly description?: string;
  /** Optional: load keys, open connections. The CA starts serving once it resolves; a rejection is a start-up error. */
  start?(context: SignerModuleContext): Promise<void> | void;
  /** The roots clients trust now (PEM or DER); asked after `start` and after every `changed()`. */
  roots(): readonly CertificateData[];
  /** Issues a certificate. Throw a `SignerRefusal` to refuse (PERMISSION_DENIED); anything else thrown is an outage (UNAVAILABLE). */
  sign(request: SignerModuleRequest): Promise<SignerModuleResult>;
  /** Optional: why the module cannot sign now (for /readyz), undefined when it can. Asked often: keep it cheap. */
  notReadyReason?(): string | undefined;
  /** Optional: release what `start` opened. */
  close?(): Promise<void> | void;
}

/**
 * Thrown by a module to refuse a request on purpose (policy: this identity is not issued here).
 * The caller gets PERMISSION_DENIED with `ERR_CA_MODULE_REFUSED` and this message, so keep it
 * free of secrets. Any error with `refusal === true` counts the same (a module need not import
 * certbroker).
 */
export class SignerRefusal extends Error {
  readonly refusal = true;

  constructor(message: string) {
    super(message);
    this.name = 'SignerRefusal';
  }
}

/** True for a `SignerRefusal`, or any error marked `refusal: true`. */
export function isSignerRefusal(err: unknown): err is Error & { readonly refusal: true } {
  return err instanceof Error && (err as { refusal?: unknown }).refusal === true;
}
