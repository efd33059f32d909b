/**
 * One error hierarchy for the whole product.
 *
 * Every error we raise on purpose is a `CertbrokerError` with a stable, closed `code`
 * (`ERR_*`, owned by the domain that raises it) and a `status` that says how a server
 * boundary must answer it. gRPC, HTTP and CNI adapters map `status` once, in one place;
 * anything that is not a `CertbrokerError` is unexpected and becomes `internal` with a
 * generic message while the cause goes to the log.
 *
 * Tests assert `code`, never `message`.
 */

/** How a boundary answers an error. Mirrors the gRPC canonical codes we actually use. */
export type ErrorStatus =
  | 'invalid-argument'
  | 'unauthenticated'
  | 'permission-denied'
  | 'not-found'
  | 'already-exists'
  | 'failed-precondition'
  | 'resource-exhausted'
  | 'unavailable'
  | 'deadline-exceeded'
  | 'unimplemented'
  | 'cancelled'
  | 'internal';

export interface CertbrokerErrorOptions {
  readonly status: ErrorStatus;
  readonly cause?: unknown;
  /**
   * Detail that is safe and useful for the caller. When absent, boundaries that must stay
   * vague (authentication, authorization) send a generic message instead of `message`.
   */
  readonly publicMessage?: string;
  /**
   * The other side asked not to be asked again sooner than this many ms (a server's retry
   * pushback: gRPC's `grpc-retry-pushback-ms`); retry policies wait at least this long.
   */
  readonly retryAfterMs?: number;
}

export class CertbrokerError<Code extends string = string> extends Error {
  readonly code: Code;
  readonly status: ErrorStatus;
  readonly publicMessage: string | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(code: Code, message: string, options: CertbrokerErrorOptions) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = options.status;
    this.publicMessage = options.publicMessage;
    this.retryAfterMs = options.retryAfterMs;
  }
}

export function isCertbrokerError(err: unknown): err is CertbrokerError {
  return err instanceof CertbrokerError;
}

/** A short, loggable description of any thrown value (never a stack on a user-facing channel). */
export function describeError(err: unknown): string {
  if (err instanceof CertbrokerError) return `${err.code}: ${err.message}`;
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * The string `code` of a thrown Error — a Node errno (`ENOENT`, `EPIPE`), a Node or library code
 * (`ABORT_ERR`, jose's `ERR_JWT_EXPIRED`) or one of ours — else undefined (not an Error, no code, or
 * a numeric one such as a Kubernetes client's HTTP status).
 */
export function errCode(err: unknown): string | undefined {
  return err instanceof Error && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}
