/**
 * What the broker holds per identity, and the one thing the certificate manager needs from the
 * CA. Plain data: DER buffers, numbers, a `Secret` for the key.
 */
import { Secret } from '../../core/secret.js';
import { certificateToPem, pemEncode } from '../../pki/pem.js';
import { BrokerError } from '../errors.js';

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

export type FetchOutcome = { readonly cert: WorkloadCert } | { readonly failure: unknown };

/**
 * One CA call for `identity`, never rejecting: the certificate, or why there is none. An answer
 * already past its notAfter at `now()` (a CA clock far behind ours, a replayed answer) is a
 * failure, ERR_CA_BAD_RESPONSE: it is never handed out.
 */
export async function fetchOnce(ca: CaClient, identity: string, signal: AbortSignal, now: () => number): Promise<FetchOutcome> {
  try {
    const cert = await ca.fetchCertificate(identity, signal);
    if (now() < cert.notAfter) return { cert };
    const failure = new BrokerError(
      'ERR_CA_BAD_RESPONSE',
      `CA returned a certificate for ${identity} that expired at ${new Date(cert.notAfter).toISOString()}`,
      { status: 'unavailable', publicMessage: 'CA returned an expired certificate' },
    );
    return { failure };
  } catch (err) {
    return { failure: err ?? new Error('CA call failed') };
  }
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

/**
 * What a consumer API sends for `cert` under the trust bundle's roots (`protocol/spiffe-x509.ts`'s
 * `SvidMaterial`, the same for the Broker API and the Workload API). Carries the private key.
 */
export function svidMaterial(cert: WorkloadCert, bundle: { readonly concatenatedDer: Buffer }) {
  return { spiffeId: cert.identity, chainDer: cert.chainDer, privateKeyDer: cert.privateKey.reveal(), bundleDer: bundle.concatenatedDer };
}
