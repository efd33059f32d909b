/**
 * The one place where errors become gRPC statuses. Every handler of every gRPC server in
 * certbroker goes through `toGrpcError`. A `CertbrokerError` keeps its status and, where it
 * has one, its public message; anything else becomes INTERNAL with a generic message and the
 * cause is logged. A server whose API defines structured error details (the Broker API) passes
 * `errorInfo`: the answer then also carries `grpc-status-details-bin`, a serialized
 * google.rpc.Status{code, message, [ErrorInfo]} with the same code and message as the status.
 */
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { encodeRpcStatus, STATUS_DETAILS_KEY, type ErrorInfo } from '../grpc/rpc-status.js';
import { ERROR_CODE_METADATA } from '../protocol/grpc-status.js';

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

/** Builds the ServiceError to hand to a gRPC callback or `call.destroy()`/`call.emit('error')`. */
export function toGrpcError(
  err: unknown,
  logger: Logger,
  context: Record<string, unknown> = {},
  options: GrpcErrorOptions = {},
): Partial<ServiceError> {
  const metadata = new Metadata();
  let code: GrpcStatus;
  let details: string;
  if (err instanceof CertbrokerError) {
    metadata.set(ERROR_CODE_METADATA, err.code);
    code = STATUS[err.status];
    details = err.publicMessage ?? GENERIC[err.status];
  } else {
    logger.error('unexpected error in gRPC handler', { ...context, err });
    code = GrpcStatus.INTERNAL;
    details = GENERIC.internal;
  }
  if (options.errorInfo) {
    const errorInfo = options.errorInfo(err instanceof CertbrokerError ? err : undefined);
    metadata.set(STATUS_DETAILS_KEY, encodeRpcStatus({ code, message: details, errorInfo }));
  }
  return { code, details, metadata };
}
