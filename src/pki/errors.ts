/** Errors raised by the pki domain. Tests assert `code`. Messages never contain key material. */
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';

export type PkiErrorCode =
  | 'ERR_PKI_DER_INVALID'
  | 'ERR_PKI_PEM_INVALID'
  | 'ERR_PKI_PEM_EMPTY'
  | 'ERR_PKI_PEM_TYPE'
  | 'ERR_PKI_KEY_INVALID'
  | 'ERR_PKI_KEY_UNSUPPORTED'
  | 'ERR_PKI_KEY_ENCRYPTED'
  | 'ERR_PKI_CSR_MALFORMED'
  | 'ERR_PKI_CSR_SIGNATURE_INVALID'
  | 'ERR_PKI_CSR_UNSUPPORTED_KEY'
  | 'ERR_PKI_CSR_UNSUPPORTED_ALGORITHM'
  | 'ERR_PKI_CERT_INVALID'
  | 'ERR_PKI_TTL_INVALID'
  | 'ERR_PKI_TTL_TOO_LONG'
  | 'ERR_PKI_SIGNER_EXPIRED'
  | 'ERR_PKI_SIGNER_NOT_CA'
  | 'ERR_PKI_SIGN_FAILED'
  | 'ERR_PKI_CHAIN_EMPTY'
  | 'ERR_PKI_CHAIN_BROKEN'
  | 'ERR_PKI_CHAIN_SIGNATURE'
  | 'ERR_PKI_CHAIN_EXPIRED'
  | 'ERR_PKI_CHAIN_NOT_CA'
  | 'ERR_PKI_CHAIN_PATHLEN'
  | 'ERR_PKI_CHAIN_UNTRUSTED'
  /** A CA answer (answer-chain.ts) that is not leaf ... root, not certificates, or not signed by the next one. */
  | 'ERR_PKI_ANSWER_INVALID'
  /** A CA answer whose leaf does not carry exactly the identity asked for. */
  | 'ERR_PKI_ANSWER_SAN_MISMATCH'
  /** A CA answer whose leaf is a CA. */
  | 'ERR_PKI_ANSWER_LEAF_CA'
  | 'ERR_PKI_CACERTS_MISSING'
  | 'ERR_PKI_CACERTS_KEY_MISMATCH'
  | 'ERR_PKI_CACERTS_INCONSISTENT'
  | 'ERR_PKI_POOL_CLOSED'
  | 'ERR_PKI_POOL_WORKER';

const STATUS: Partial<Record<PkiErrorCode, ErrorStatus>> = {
  ERR_PKI_SIGNER_EXPIRED: 'failed-precondition',
  ERR_PKI_SIGNER_NOT_CA: 'failed-precondition',
  ERR_PKI_SIGN_FAILED: 'internal',
  ERR_PKI_CACERTS_MISSING: 'failed-precondition',
  ERR_PKI_CACERTS_KEY_MISMATCH: 'failed-precondition',
  ERR_PKI_CACERTS_INCONSISTENT: 'failed-precondition',
  ERR_PKI_POOL_CLOSED: 'unavailable',
  ERR_PKI_POOL_WORKER: 'internal',
  // A CA's answer is not the caller's input: the relay that checks it was served badly.
  ERR_PKI_ANSWER_INVALID: 'unavailable',
  ERR_PKI_ANSWER_SAN_MISMATCH: 'unavailable',
  ERR_PKI_ANSWER_LEAF_CA: 'unavailable',
};

export class PkiError extends CertbrokerError<PkiErrorCode> {
  constructor(code: PkiErrorCode, message: string, cause?: unknown) {
    const status = STATUS[code] ?? 'invalid-argument';
    // Input problems (CSR, PEM, TTL) are safe to tell the caller; signer problems are not.
    super(code, message, { status, cause, publicMessage: status === 'invalid-argument' ? message : undefined });
  }
}
