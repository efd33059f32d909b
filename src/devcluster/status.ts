/**
 * Kubernetes `Status` objects and the error type that carries one. Every failure the devcluster
 * answers is an `ApiError` whose body is a `Status` shaped as the real API server shapes it
 * (reason, code, message, details), so clients that branch on `reason` or `code` behave as they
 * would against a real cluster.
 */
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';

export type DevclusterErrorCode =
  | 'ERR_DEVCLUSTER_NOT_FOUND'
  | 'ERR_DEVCLUSTER_ALREADY_EXISTS'
  | 'ERR_DEVCLUSTER_CONFLICT'
  | 'ERR_DEVCLUSTER_INVALID'
  | 'ERR_DEVCLUSTER_BAD_REQUEST'
  | 'ERR_DEVCLUSTER_UNAUTHORIZED'
  | 'ERR_DEVCLUSTER_FORBIDDEN'
  | 'ERR_DEVCLUSTER_METHOD_NOT_ALLOWED'
  | 'ERR_DEVCLUSTER_UNSUPPORTED_MEDIA_TYPE'
  | 'ERR_DEVCLUSTER_NOT_ACCEPTABLE'
  | 'ERR_DEVCLUSTER_TOO_LARGE'
  | 'ERR_DEVCLUSTER_GONE'
  | 'ERR_DEVCLUSTER_TOO_MANY_REQUESTS'
  | 'ERR_DEVCLUSTER_INTERNAL';

export interface StatusCause {
  readonly reason?: string;
  readonly message: string;
  readonly field?: string;
}

export interface StatusDetails {
  readonly name?: string;
  readonly group?: string;
  readonly kind?: string;
  readonly uid?: string;
  readonly causes?: readonly StatusCause[];
  readonly retryAfterSeconds?: number;
}

export interface StatusBody {
  readonly kind: 'Status';
  readonly apiVersion: 'v1';
  readonly metadata: Record<string, never>;
  readonly status: 'Failure' | 'Success';
  readonly message?: string;
  readonly reason?: string;
  readonly details?: StatusDetails;
  readonly code: number;
}

const STATUS_OF: Record<number, ErrorStatus> = {
  400: 'invalid-argument',
  401: 'unauthenticated',
  403: 'permission-denied',
  404: 'not-found',
  405: 'unimplemented',
  406: 'invalid-argument',
  409: 'already-exists',
  410: 'failed-precondition',
  413: 'invalid-argument',
  415: 'invalid-argument',
  422: 'invalid-argument',
  429: 'resource-exhausted',
  500: 'internal',
};

/** A failure answered with a Kubernetes Status body and the matching HTTP code. */
export class ApiError extends CertbrokerError<DevclusterErrorCode> {
  readonly httpCode: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  readonly headers: Readonly<Record<string, string>>;

  constructor(options: {
    code: DevclusterErrorCode;
    httpCode: number;
    reason: string;
    message: string;
    details?: StatusDetails;
    headers?: Record<string, string>;
  }) {
    super(options.code, options.message, {
      status: STATUS_OF[options.httpCode] ?? 'internal',
      publicMessage: options.message,
    });
    this.httpCode = options.httpCode;
    this.reason = options.reason;
    this.details = options.details;
    this.headers = options.headers ?? {};
  }

  toStatus(): StatusBody {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(this.details ? { details: this.details } : {}),
      code: this.httpCode,
    };
  }
}

/** `pods` or `deployments.apps`: how the API server names a resource in messages. */
export function qualifiedResource(resource: string, group: string): string {
  return group === '' ? resource : `${resource}.${group}`;
}

export function notFound(resource: string, group: string, name: string): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_NOT_FOUND',
    httpCode: 404,
    reason: 'NotFound',
    message: `${qualifiedResource(resource, group)} "${name}" not found`,
    details: { name, ...(group ? { group } : {}), kind: resource },
  });
}

export function unknownPath(): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_NOT_FOUND',
    httpCode: 404,
    reason: 'NotFound',
    message: 'the server could not find the requested resource',
    details: {},
  });
}

export function alreadyExists(resource: string, group: string, name: string): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_ALREADY_EXISTS',
    httpCode: 409,
    reason: 'AlreadyExists',
    message: `${qualifiedResource(resource, group)} "${name}" already exists`,
    details: { name, ...(group ? { group } : {}), kind: resource },
  });
}

export function conflict(resource: string, group: string, name: string, why: string): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_CONFLICT',
    httpCode: 409,
    reason: 'Conflict',
    message: `Operation cannot be fulfilled on ${qualifiedResource(resource, group)} "${name}": ${why}`,
    details: { name, ...(group ? { group } : {}), kind: resource },
  });
}

export const MODIFIED_MESSAGE =
  'the object has been modified; please apply your changes to the latest version and try again';

export function invalid(kind: string, group: string, name: string, causes: readonly StatusCause[]): ApiError {
  const text = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
  const joined = text.length === 1 ? text[0]! : `[${text.join(', ')}]`;
  return new ApiError({
    code: 'ERR_DEVCLUSTER_INVALID',
    httpCode: 422,
    reason: 'Invalid',
    message: `${kind}${group ? '.' + group : ''} "${name}" is invalid: ${joined}`,
    details: { name, ...(group ? { group } : {}), kind, causes: causes.map((c) => ({ reason: c.reason ?? 'FieldValueInvalid', message: c.message, ...(c.field ? { field: c.field } : {}) })) },
  });
}

export function badRequest(message: string): ApiError {
  return new ApiError({ code: 'ERR_DEVCLUSTER_BAD_REQUEST', httpCode: 400, reason: 'BadRequest', message });
}

export function unauthorized(): ApiError {
  return new ApiError({ code: 'ERR_DEVCLUSTER_UNAUTHORIZED', httpCode: 401, reason: 'Unauthorized', message: 'Unauthorized' });
}

export function forbidden(message: string, details: StatusDetails): ApiError {
  return new ApiError({ code: 'ERR_DEVCLUSTER_FORBIDDEN', httpCode: 403, reason: 'Forbidden', message, details });
}

export function methodNotAllowed(): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_METHOD_NOT_ALLOWED',
    httpCode: 405,
    reason: 'MethodNotAllowed',
    message: 'the server does not allow this method on the requested resource',
    details: {},
  });
}

export function unsupportedMediaType(contentType: string, accepted: readonly string[]): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_UNSUPPORTED_MEDIA_TYPE',
    httpCode: 415,
    reason: 'UnsupportedMediaType',
    message: `the body of the request was in an unknown format${contentType ? ` (${contentType})` : ''} - accepted media types include: ${accepted.join(', ')}`,
  });
}

export function tooLarge(limitBytes: number): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_TOO_LARGE',
    httpCode: 413,
    reason: 'RequestEntityTooLarge',
    message: `Request entity too large: limit is ${limitBytes}`,
  });
}

export function expired(message: string): ApiError {
  return new ApiError({ code: 'ERR_DEVCLUSTER_GONE', httpCode: 410, reason: 'Expired', message });
}

export function tooManyRequests(retryAfterSeconds: number): ApiError {
  return new ApiError({
    code: 'ERR_DEVCLUSTER_TOO_MANY_REQUESTS',
    httpCode: 429,
    reason: 'TooManyRequests',
    message: 'Too many requests, please try again later.',
    details: { retryAfterSeconds },
    headers: { 'retry-after': String(retryAfterSeconds) },
  });
}

export function internalError(message = 'an error on the server has prevented the request from succeeding'): ApiError {
  return new ApiError({ code: 'ERR_DEVCLUSTER_INTERNAL', httpCode: 500, reason: 'InternalError', message, details: {} });
}
