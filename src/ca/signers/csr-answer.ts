/**
 * The check of a certificate an external backend issued before the CA hands it out (the backend
 * is outside the CA's trust: it may be misconfigured or another signer's) — what a Kubernetes
 * signer put into `status.certificate`, what step-ca's `/1.0/sign` answered: the PEM holds the
 * leaf first, then intermediates; issued-chain.ts (shared with the signer modules) checks that
 * the leaf chains to one of the CA's configured roots, holds the CSR's key, and is a valid
 * X509-SVID for exactly the identity asked for (with every serving name asked, for a node
 * agent's); a serving certificate (DNS/IP names, no SPIFFE ID) instead carries every asked name.
 * The answer is the Istio CA response shape: leaf, the intermediates on the verified path (one
 * per element), the roots.
 */
import { parseCertificate, parsePemBlocksOfType, type x509 } from '../../pki/index.js';
import { CaError } from '../errors.js';
import type { SignedChain } from '../signer.js';
import { checkIssuedChain, parseCaCertificate } from './issued-chain.js';

export interface CsrAnswerInput {
  readonly certificatePem: string;
  readonly roots: readonly x509.X509Certificate[];
  /** The roots as the response's last element. */
  readonly rootsPem: string;
  /** SubjectPublicKeyInfo DER of the CSR's key. */
  readonly csrSpki: Buffer;
  readonly nowMs: number;
  /** What was asked: an SVID for `spiffeId` (and its serving names, if any), or a serving certificate for `servingNames`. */
  readonly expect: { readonly spiffeId: string; readonly servingNames?: readonly string[] } | { readonly servingNames: readonly string[] };
  /** The CSR's name (or what it was sent to), for messages. */
  readonly csrName: string;
}

function bad(input: CsrAnswerInput, why: string, cause?: unknown): CaError {
  return new CaError('ERR_CA_CSR_BAD_CERTIFICATE', `certificate issued for CSR ${input.csrName}: ${why}`, {
    status: 'internal',
    publicMessage: 'the signer issued an unusable certificate',
    cause,
  });
}

export function chainFromCsrAnswer(input: CsrAnswerInput): SignedChain {
  let certs: x509.X509Certificate[];
  try {
    const [first, ...rest] = parsePemBlocksOfType(input.certificatePem, 'CERTIFICATE', 'issued certificate');
    certs = first === undefined ? [] : [parseCertificate(new Uint8Array(first)), ...rest.map(parseCaCertificate)];
  } catch (err) {
    throw bad(input, 'status.certificate is not PEM certificates', err);
  }
  const leaf = certs[0];
  if (leaf === undefined) throw bad(input, 'status.certificate holds no certificate');
  const spiffeId = 'spiffeId' in input.expect ? input.expect.spiffeId : undefined;
  // A serving certificate has no SPIFFE ID, so the X509-SVID rules are for SVIDs only.
  const want = { spki: input.csrSpki, spiffeId, names: input.expect.servingNames ?? [], svid: spiffeId !== undefined };
  return checkIssuedChain({ leaf, intermediates: certs.slice(1), roots: input.roots, rootsPem: input.rootsPem }, want, input.nowMs, (why, cause) => bad(input, why, cause));
}
