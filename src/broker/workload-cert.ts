/**
 * What the broker holds per identity, and the one thing the certificate manager needs from the
 * CA. Plain data: DER buffers, numbers, a `Secret` for the key.
 */
import { Secret } from '../core/secret.js';
import { certificateToPem, pemEncode } from '../pki/pem.js';

export interface WorkloadCert {
  /** The SPIFFE ID the leaf carries, `spiffe://<td>/ns/<ns>/sa/<sa>`. */
  readonly identity: string;
  /** DER certificates, leaf first, then intermediates (roots excluded). */
  readonly chainDer: readonly Buffer[];
  /** DER root certificates the CA sent with this chain (the trust bundle). */
  readonly rootsDer: readonly Buffer[];
  /** The leaf's private key, PKCS#8 DER. Never logged. */
  readonly privateKey: Secret<Buffer>;
  /** The leaf's serial number, lower-case hex. */
  readonly serial: string;
  /** ms since epoch. */
  readonly notBefore: number;
  /** ms since epoch. */
  readonly notAfter: number;
}

/** How the certificate manager reaches the CA (ztunnel's `CaClientTrait`). */
export interface CaClient {
  /** Obtains a fresh certificate for `identity`; rejects on any failure; honours `signal`. */
  fetchCertificate(identity: string, signal: AbortSignal): Promise<WorkloadCert>;
}

/** A cert is usable while now is before notAfter. */
export function isUsable(cert: WorkloadCert | undefined, now: number): cert is WorkloadCert {
  return cert !== undefined && now < cert.notAfter;
}

/** Loggable facts about a certificate (never the key). */
export function describeCert(cert: WorkloadCert): { identity: string; serial: string; notBefore: string; notAfter: string } {
  return {
    identity: cert.identity,
    serial: cert.serial,
    notBefore: new Date(cert.notBefore).toISOString(),
    notAfter: new Date(cert.notAfter).toISOString(),
  };
}

/** The chain (leaf first) and the PKCS#8 key as PEM, as TLS stacks and files want them. */
export function workloadCertPem(cert: WorkloadCert): { readonly certChainPem: string; readonly privateKeyPem: Secret<string> } {
  return {
    certChainPem: cert.chainDer.map((d) => certificateToPem(d)).join(''),
    privateKeyPem: new Secret(pemEncode('PRIVATE KEY', cert.privateKey.reveal())),
  };
}
