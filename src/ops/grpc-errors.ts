/**
 * The one place where errors become gRPC statuses. Every handler of every gRPC server in
 * certbroker goes through `grpcStatusFor` (grpc-js handlers through its wrapper `toGrpcError`). A `CertbrokerError` keeps its status and, where it
 * has one, its public message, and a `retryAfterMs` it carries goes out as gRFC A6's
 * `grpc-retry-pushback-ms`; anything else becomes INTERNAL with a generic message and the
 * cause is logged. A server whose API defines structured error details (the Broker API) passes
 * `errorInfo`: the answer then also carries `grpc-status-details-bin`, a serialized
 * google.rpc.Status{code, message, [ErrorInfo]} with the same code and message as the status.
 */
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { retryPushbackValue } from '../grpc/retry-pushback.js';
import { encodeRpcStatus, STATUS_DETAILS_KEY, type ErrorInfo } from '../grpc/rpc-status.js';
import { ERROR_CODE_METADATA, RETRY_PUSHBACK_METADATA } from '../protocol/grpc-status.js';

export interface GrpcErrorOptions {
  /** The ErrorInfo for `err` (`undefined` for an unexpected error, which answers INTERNAL). */
  readonly errorInfo?: (err: CertbrokerError | undefined) => ErrorInfo;
}

const STATUS: Record<ErrorStatus, GrpcStatus> = {
  'invalid-argument': GrpcStatus.INVALID_ARGUMENT,
  unauthenticated: GrpcStatus.UNAUTHENTICATED,
  'permission-denied': GrpcStatus.PERMISSION_DENIED,
  'not-found': GrpcStatus.NOT_FOUND,
  'already-exists': GrpcStatus.ALREADY_EXISTS,
  'failed-precondition': GrpcStatus.FAILED_PRECONDITION,
  'resource-exhausted': GrpcStatus.RESOURCE_EXHAUSTED,
  unavailable: GrpcStatus.UNAVAILABLE,
  'deadline-exceeded': GrpcStatus.DEADLINE_EXCEEDED,
  unimplemented: GrpcStatus.UNIMPLEMENTED,
  cancelled: GrpcStatus.CANCELLED,
  internal: GrpcStatus.INTERNAL,
};

const GENERIC: Record<ErrorStatus, string> = {
  'invalid-argument': 'invalid argument',
  unauthenticated: 'authentication failed',
  'permission-denied': 'permission denied',
  'not-found': 'not found',
  'already-exists': 'already exists',
  'failed-precondition': 'failed precondition',
  'resource-exhausted': 'resource exhausted',
  unavailable: 'service unavailable',
  'deadline-exceeded': 'deadline exceeded',
  unimplemented: 'method not supported by this server',
  cancelled: 'cancelled',
  internal: 'internal error',
};

/**
 * A gRPC status as plain data: code, message and trailing metadata pairs (a `-bin` key carries
 * bytes). What every transport sends: grpc-js through `toServiceError`, the CA's http2
 * transport by writing the pairs as trailers itself.
 */
export interface GrpcStatusAnswer {
  readonly code: GrpcStatus;
  readonly details: string;
  readonly metadata: ReadonlyArray<readonly [key: string, value: string | Buffer]>;
}

/** The status to answer for `err` (see the file comment); an unexpected error is logged here. */
export function grpcStatusFor(
  err: unknown,
  logger: Logger,
  context: Record<string, unknown> = {},
  options: GrpcErrorOptions = {},
): GrpcStatusAnswer {
  const metadata: Array<readonly [string, string | Buffer]> = [];
  let code: GrpcStatus;
  let details: string;
  if (err instanceof CertbrokerError) {
    metadata.push([ERROR_CODE_METADATA, err.code]);
    // A refusal that says when to come back carries it as gRFC A6's server pushback.
    if (err.retryAfterMs !== undefined && Number.isFinite(err.retryAfterMs)) metadata.push([RETRY_PUSHBACK_METADATA, retryPushbackValue(err.retryAfterMs)]);
    code = STATUS[err.status];
    details = err.publicMessage ?? GENERIC[err.status];
  } else {
    logger.error('unexpected error in gRPC handler', { ...context, err });
    code = GrpcStatus.INTERNAL;
    details = GENERIC.internal;
  }
  if (options.errorInfo) {
    const errorInfo = options.errorInfo(err instanceof CertbrokerError ? err : undefined);
    metadata.push([STATUS_DETAILS_KEY, encodeRpcStatus({ code, message: details, errorInfo })]);
  }
  return { code, details, metadata };
}

/** The answer as grpc-js takes it (a callback's error, `call.destroy()`, `call.emit('error')`). */
export function toServiceError(answer: GrpcStatusAnswer): Partial<ServiceError> {
  const metadata = new Metadata();
  for (const [key, value] of answer.metadata) metadata.set(key, value);
  return { code: answer.code, details: answer.details, metadata };
}

/** Builds the ServiceError to hand to a gRPC callback or `call.destroy()`/`call.emit('error')`. */
export function toGrpcError(
  err: unknown,
  logger: Logger,
  context: Record<string, unknown> = {},
  options: GrpcErrorOptions = {},
): Partial<ServiceError> {
  return toServiceError(grpcStatusFor(err, logger, context, options));
}
