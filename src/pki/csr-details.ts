/**
 * The @peculiar/x509 views of a PKCS#10 CSR, off the issuing hot path: its subject and
 * requested URIs for diagnostics and tests, and a reference signature check. Apart from csr.ts
 * so the fast issuing path (and the pool's worker threads) never load @peculiar/x509.
 */
import { csrDer, malformed } from './csr.js';
import { x509 } from './x509-lib.js';

export interface CsrDetails {
  /** Subject in RFC 4514-ish text ('' when empty). */
  readonly subject: string;
  /** URI SANs requested in the extensionRequest. */
  readonly uris: readonly string[];
  /** Whether the requested SAN extension is critical. */
  readonly sanCritical: boolean | undefined;
  /** Requested DNS names, IP addresses and e-mail addresses (a signer decides whether it grants them). */
  readonly dnsNames: readonly string[];
  readonly ipAddresses: readonly string[];
  readonly emails: readonly string[];
  /** Requested SAN entries of any other kind (otherName, directoryName, registeredID, ...). */
  readonly otherSans: number;
}

/** Reads the subject and requested URIs with @peculiar/x509 (not on the issuing hot path). */
export function readCsrDetails(input: string | Uint8Array): CsrDetails {
  const der = csrDer(input);
  let req: x509.Pkcs10CertificateRequest;
  try {
    req = new x509.Pkcs10CertificateRequest(der);
  } catch (err) {
    throw malformed('cannot be parsed', err);
  }
  const ext = req.extensions.find((e) => e.type === '2.5.29.17');
  const san = ext ? new x509.SubjectAlternativeNameExtension(ext.rawData) : undefined;
  const items = san?.names.items ?? [];
  const of = (type: string) => items.filter((n) => n.type === type).map((n) => n.value);
  const known = new Set(['url', 'dns', 'ip', 'email']);
  return {
    subject: req.subject,
    uris: of('url'),
    sanCritical: san?.critical,
    dnsNames: of('dns'),
    ipAddresses: of('ip'),
    emails: of('email'),
    otherSans: items.filter((n) => !known.has(n.type)).length,
  };
}

/** Reference verification of a CSR signature through @peculiar/x509 + WebCrypto. */
export async function verifyCsrReference(input: string | Uint8Array): Promise<boolean> {
  const req = new x509.Pkcs10CertificateRequest(csrDer(input));
  return req.verify();
}
