/**
 * CNI errors. Every failure the plugin reports on purpose is a `CniError` with a closed `ERR_CNI_*`
 * code; the code maps once, here, to the numeric code of the CNI spec's error result
 * (`{"cniVersion","code","msg","details"}`). Codes 1–99 are the spec's well-known codes, 100+ are
 * ours (plugin specific, as the spec allows), 999 is "unexpected".
 */
import { CertbrokerError, type ErrorStatus } from '../../core/errors.js';

export type CniErrorCode =
  | 'ERR_CNI_INCOMPATIBLE_VERSION'
  | 'ERR_CNI_UNSUPPORTED_FIELD'
  | 'ERR_CNI_INVALID_ENV'
  | 'ERR_CNI_IO'
  | 'ERR_CNI_DECODE'
  | 'ERR_CNI_INVALID_CONFIG'
  | 'ERR_CNI_TRY_AGAIN'
  | 'ERR_CNI_NOT_AVAILABLE'
  | 'ERR_CNI_KUBE_API'
  | 'ERR_CNI_BROKER_REJECTED'
  | 'ERR_CNI_REDIRECT_PARAMS'
  | 'ERR_CNI_REDIRECT_FAILED'
  | 'ERR_CNI_INTERNAL';

/** Numeric code on the wire for each error code. */
export const CNI_WIRE_CODE: Readonly<Record<CniErrorCode, number>> = Object.freeze({
  ERR_CNI_INCOMPATIBLE_VERSION: 1,
  ERR_CNI_UNSUPPORTED_FIELD: 2,
  ERR_CNI_INVALID_ENV: 4,
  ERR_CNI_IO: 5,
  ERR_CNI_DECODE: 6,
  ERR_CNI_INVALID_CONFIG: 7,
  ERR_CNI_TRY_AGAIN: 11,
  ERR_CNI_NOT_AVAILABLE: 50,
  /** The API server answered with a non-retryable error (401, 403, 404 after retries, ...). */
  ERR_CNI_KUBE_API: 100,
  /** The broker's registration socket answered, but not with 200. */
  ERR_CNI_BROKER_REJECTED: 101,
  /** A sidecar pod's traffic annotations are invalid. */
  ERR_CNI_REDIRECT_PARAMS: 102,
  /** Programming the redirect rules in the pod's network namespace failed. */
  ERR_CNI_REDIRECT_FAILED: 103,
  ERR_CNI_INTERNAL: 999,
});

const STATUS: Readonly<Record<CniErrorCode, ErrorStatus>> = {
  ERR_CNI_INCOMPATIBLE_VERSION: 'invalid-argument',
  ERR_CNI_UNSUPPORTED_FIELD: 'invalid-argument',
  ERR_CNI_INVALID_ENV: 'invalid-argument',
  ERR_CNI_IO: 'internal',
  ERR_CNI_DECODE: 'invalid-argument',
  ERR_CNI_INVALID_CONFIG: 'invalid-argument',
  ERR_CNI_TRY_AGAIN: 'unavailable',
  ERR_CNI_NOT_AVAILABLE: 'unavailable',
  ERR_CNI_KUBE_API: 'failed-precondition',
  ERR_CNI_BROKER_REJECTED: 'failed-precondition',
  ERR_CNI_REDIRECT_PARAMS: 'invalid-argument',
  ERR_CNI_REDIRECT_FAILED: 'internal',
  ERR_CNI_INTERNAL: 'internal',
};

export class CniError extends CertbrokerError<CniErrorCode> {
  /** Longer, still safe, explanation for the `details` field. */
  readonly details: string;

  constructor(code: CniErrorCode, message: string, options: { details?: string; cause?: unknown } = {}) {
    super(code, message, { status: STATUS[code], cause: options.cause });
    this.details = options.details ?? '';
  }

  get wireCode(): number {
    return CNI_WIRE_CODE[this.code];
  }
}

/** The spec's error result object. */
export interface CniErrorResult {
  readonly cniVersion: string;
  readonly code: number;
  readonly msg: string;
  readonly details: string;
}

/**
 * Turns anything thrown into the error result. Unexpected errors become 999 with a generic
 * message: their text (which may carry paths or stack fragments) goes to the log only.
 */
export function toErrorResult(err: unknown, cniVersion: string): CniErrorResult {
  if (err instanceof CniError) {
    return { cniVersion, code: err.wireCode, msg: err.message, details: err.details };
  }
  return { cniVersion, code: CNI_WIRE_CODE.ERR_CNI_INTERNAL, msg: 'internal error in istio-cni plugin', details: '' };
}
