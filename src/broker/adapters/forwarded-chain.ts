/**
 * The check of a CA answer the Istio CA front relays: pki's cheap `checkAnswerChain` (one URI
 * SAN = the identity asked for, not a CA, signed by the next certificate; see
 * src/pki/answer-chain.ts), with its ERR_PKI_ANSWER_* codes as the broker's CA-answer codes. The
 * full X509-SVID rules of `parseCaResponse` guard the broker's own cache, whose keys it hands out.
 * The leaf's SPKI goes back so the front compares it with the CSR's.
 */
import { checkAnswerChain } from '../../pki/answer-chain.js';
import { PkiError } from '../../pki/errors.js';
import type { IstioCertificateResponse } from '../../protocol/istio-ca.js';
import { BrokerError } from '../errors.js';

export interface ForwardedChain {
  /** The CA's `cert_chain`, as it came. */
  readonly certChain: readonly string[];
  /** SubjectPublicKeyInfo DER of the leaf. */
  readonly leafSpki: Buffer;
}

/** Throws ERR_CA_BAD_RESPONSE / ERR_CA_SAN_MISMATCH / ERR_CA_LEAF_NOT_SVID unless the answer is usable for `identity`. */
export function checkForwardedChain(response: Partial<IstioCertificateResponse>, identity: string): ForwardedChain {
  try {
    const { certChain, leaf } = checkAnswerChain(response.cert_chain ?? [], identity);
    return { certChain, leafSpki: Buffer.from(leaf.spki) };
  } catch (err) {
    if (!(err instanceof PkiError)) throw err;
    const code = err.code === 'ERR_PKI_ANSWER_SAN_MISMATCH' ? 'ERR_CA_SAN_MISMATCH' : err.code === 'ERR_PKI_ANSWER_LEAF_CA' ? 'ERR_CA_LEAF_NOT_SVID' : 'ERR_CA_BAD_RESPONSE';
    throw new BrokerError(code, `CA response for ${identity}: ${err.message}`, { status: 'unavailable', cause: err });
  }
}
