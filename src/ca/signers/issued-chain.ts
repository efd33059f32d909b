/**
 * The check a CA makes of a certificate an outside signer issued (a Kubernetes signer's
 * `status.certificate`, a signer module's result) before it hands it out — the signer is outside
 * the CA's trust, it may be misconfigured or buggy: the leaf chains through the intermediates to
 * one of the roots (pki's `verifyChain`, at `nowMs`), holds the CSR's key, obeys the X509-SVID
 * leaf rules when asked, carries exactly the SPIFFE ID asked for (when one was) and every DNS/IP
 * name asked for. The answer is the Istio CA response shape: leaf, the intermediates on the
 * verified path (one per element), the roots. Each caller names its own error (`bad`).
 */
import { X509Certificate } from 'node:crypto';
import { verifyChain } from '../../pki/chain.js';
import { certificateToPem } from '../../pki/pem.js';
import { missingServingNames } from '../../pki/x509-fields.js';
import { parseCertificate, type x509 } from '../../pki/x509-lib.js';
import { x509SvidProblems } from '../../spiffe/x509-svid.js';
import type { CaError } from '../errors.js';
import type { SignedChain } from '../signer.js';

/**
 * A root or intermediate parsed before, by its DER: an outside signer sends the same few with
 * every leaf, and parsing one with @peculiar/x509 costs a few ms on a busy core (the cached
 * objects also keep `verifyChain`'s node:crypto certificates). Bounded against a signer whose
 * tail changes every call.
 */
const parsedCas = new Map<string, x509.X509Certificate>();
const MAX_PARSED_CAS = 32;

export function parseCaCertificate(der: Buffer): x509.X509Certificate {
  const key = der.toString('base64');
  let cert = parsedCas.get(key);
  if (cert === undefined) {
    cert = parseCertificate(new Uint8Array(der));
    if (parsedCas.size >= MAX_PARSED_CAS) parsedCas.clear();
    parsedCas.set(key, cert);
  }
  return cert;
}

export interface IssuedChain {
  readonly leaf: x509.X509Certificate;
  readonly intermediates: readonly x509.X509Certificate[];
  readonly roots: readonly x509.X509Certificate[];
  /** The roots as the response's last element. */
  readonly rootsPem: string;
}

export interface IssuedExpectation {
  /** SubjectPublicKeyInfo DER of the CSR's key. */
  readonly spki: Uint8Array;
  /** The leaf's one SPIFFE ID, or undefined when none was asked (a serving certificate). */
  readonly spiffeId: string | undefined;
  /** DNS names and IP literals the leaf must carry as SANs. */
  readonly names: readonly string[];
  /** Check the X509-SVID leaf rules (one URI SAN, CA:FALSE, keyUsage ...). */
  readonly svid: boolean;
}

export function checkIssuedChain(chain: IssuedChain, want: IssuedExpectation, nowMs: number, bad: (why: string, cause?: unknown) => CaError): SignedChain {
  const { leaf } = chain;
  let path: x509.X509Certificate[];
  try {
    path = verifyChain({ leaf, intermediates: chain.intermediates, roots: chain.roots, nowMs });
  } catch (err) {
    throw bad(`does not chain to the roots (${(err as { code?: string }).code ?? 'error'})`, err);
  }
  const node = new X509Certificate(Buffer.from(leaf.rawData));
  if (!node.publicKey.export({ type: 'spki', format: 'der' }).equals(Buffer.from(want.spki))) throw bad("the leaf does not hold the CSR's key");
  if (want.svid) {
    const { spiffeId, problems } = x509SvidProblems(leaf, { role: 'leaf' });
    if (problems.length > 0) throw bad(`the leaf is not a valid X509-SVID: ${problems.map((p) => p.code).join(', ')}`);
    if (want.spiffeId !== undefined && spiffeId?.id !== want.spiffeId) throw bad(`the leaf is for ${spiffeId?.id ?? '(no SPIFFE ID)'}, asked for ${want.spiffeId}`);
  } else if (node.ca) {
    throw bad('the leaf is a CA');
  }
  const missing = missingServingNames(node, want.names);
  if (missing.length > 0) throw bad(`the leaf lacks ${missing.join(', ')}`);
  return {
    certChain: [certificateToPem(new Uint8Array(leaf.rawData)), ...path.slice(1, -1).map((c) => certificateToPem(new Uint8Array(c.rawData))), chain.rootsPem],
    serialHex: leaf.serialNumber,
    notAfterMs: leaf.notAfter.getTime(),
  };
}
