/**
 * The one place where errors become gRPC statuses. Every handler of every gRPC server in
 * certbroker goes through `toGrpcError`. A `CertbrokerError` keeps its status and, where it
 * has one, its public message; anything else becomes INTERNAL with a generic message and the
 * cause is logged.
 */
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';
import type { Logger } from '../core/log.js';

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
export function toGrpcError(err: unknown, logger: Logger, context: Record<string, unknown> = {}): Partial<ServiceError> {
  if (err instanceof CertbrokerError) {
    const metadata = new Metadata();
    metadata.set('certbroker-error-code', err.code);
    return { code: STATUS[err.status], details: err.publicMessage ?? GENERIC[err.status], metadata };
  }
  logger.error('unexpected error in gRPC handler', { ...context, err });
  return { code: GrpcStatus.INTERNAL, details: GENERIC.internal };
}
