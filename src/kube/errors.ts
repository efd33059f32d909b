/** Errors of the Kubernetes adapters. */
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';

export type KubeErrorCode =
  | 'ERR_KUBE_CONFIG_INVALID'
  | 'ERR_KUBE_INFORMER_STOPPED'
  /** The API server answered with an error status (see `KubeApiError.httpStatus`). */
  | 'ERR_KUBE_API_STATUS'
  /** No answer: connection refused or reset, TLS failure, the stream broke. */
  | 'ERR_KUBE_UNREACHABLE'
  /** No answer within the request's deadline. */
  | 'ERR_KUBE_TIMEOUT'
  /** An answer that is not what the API promises (not JSON, no items). */
  | 'ERR_KUBE_RESPONSE_INVALID';

export class KubeError extends CertbrokerError<KubeErrorCode> {
  constructor(code: KubeErrorCode, message: string, options: { status: ErrorStatus; cause?: unknown }) {
    super(code, message, options);
  }
}

function statusOf(httpStatus: number): ErrorStatus {
  if (httpStatus === 401) return 'unauthenticated';
  if (httpStatus === 403) return 'permission-denied';
  if (httpStatus === 404) return 'not-found';
  if (httpStatus === 409 || httpStatus === 410) return 'failed-precondition';
  if (httpStatus === 429) return 'resource-exhausted';
  if (httpStatus === 504) return 'deadline-exceeded';
  if (httpStatus >= 500) return 'unavailable';
  return 'internal';
}

/** An error status from the API server, with its `Status.reason` and any `Retry-After`. */
export class KubeApiError extends KubeError {
  readonly httpStatus: number;
  /** `Status.reason` (e.g. `Expired`, `TooManyRequests`), when the body was a Status. */
  readonly reason: string | undefined;

  constructor(options: { readonly what: string; readonly httpStatus: number; readonly reason?: string; readonly detail?: string; readonly retryAfterMs?: number }) {
    const retry = options.retryAfterMs === undefined ? '' : ` (Retry-After ${Math.round(options.retryAfterMs / 1000)} s)`;
    const detail = options.detail ? `: ${options.detail}` : '';
    super('ERR_KUBE_API_STATUS', `${options.what}: HTTP ${options.httpStatus}${options.reason ? ` ${options.reason}` : ''}${detail}${retry}`, {
      status: statusOf(options.httpStatus),
      // The `Retry-After` header in milliseconds, when the server sent one (`retryAfterMs`).
      ...(options.retryAfterMs !== undefined ? { retryAfterMs: options.retryAfterMs } : {}),
    });
    this.httpStatus = options.httpStatus;
    this.reason = options.reason;
  }
}
