/**
 * What the two streaming fronts (the Broker API and the Workload API) do alike with their X.509
 * streams, written once: the observer they report to, the stream's first certificate (waited
 * for across CA failures), paced updates after a change, the security header check, the refusals
 * both give (JWT-SVID profile disabled, shutting down) and how a refusal is counted, logged and
 * mapped. Each front keeps its own caller checks and ErrorInfo.
 */
import type { Metadata } from '@grpc/grpc-js';
import type { Clock } from '../../core/clock.js';
import { describeError, type ErrorStatus } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Rng } from '../../core/rng.js';
import { toGrpcError, type GrpcErrorOptions } from '../../ops/grpc-errors.js';
import type { CertManager, WorkloadCert } from '../cache/index.js';
import { BrokerError, isAbortError, type BrokerErrorCode } from '../errors.js';

export type SvidStreamRpc = 'x509svid' | 'x509bundles';

/** A streaming front's events, for its metrics. */
export interface SvidStreamObserver {
  streamOpened?(rpc: SvidStreamRpc): void;
  streamClosed?(rpc: SvidStreamRpc): void;
  /** Time from the request to its first message (ms). */
  firstMessage?(rpc: SvidStreamRpc, ms: number): void;
  rejected?(rpc: string, code: string): void;
}

/**
 * Waits for the identity's certificate and hands it to `send`. A failed fetch does not end the
 * stream: the consumer asked, the manager keeps retrying with backoff, and the first success is
 * sent. Ends quietly when `signal` aborts; any other error goes to `fail`.
 */
export async function firstCertificate(
  certs: CertManager,
  identity: string,
  stream: { readonly signal: AbortSignal; readonly log: Logger; send(cert: WorkloadCert): void; fail(err: unknown): void },
): Promise<void> {
  for (;;) {
    try {
      stream.send(await certs.waitForCert(identity, stream.signal));
      return;
    } catch (err) {
      if (isAbortError(err) || stream.signal.aborted) return;
      if (err instanceof BrokerError && err.code === 'ERR_CERT_UNAVAILABLE') {
        stream.log.info('certificate not available yet; stream keeps waiting', { err: describeError(err) });
        continue;
      }
      stream.fail(err);
      return;
    }
  }
}

/**
 * Paced updates for one stream: the returned `schedule()` arms at most one pending send, after a
 * random share of `windowMs`, and `send` then sends whatever is current (so a burst of changes
 * is one message, and one change does not reach every consumer in the same instant).
 */
export function pacedUpdates(
  pacing: { readonly clock: Clock; readonly rng: Rng; readonly windowMs: number; readonly signal: AbortSignal },
  send: () => void,
): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    pacing.clock.sleep(pacing.rng() * pacing.windowMs, pacing.signal).then(
      () => {
        pending = false;
        send();
      },
      () => undefined,
    );
  };
}

/** The JWT-SVID RPCs' answer (UNIMPLEMENTED: clients must not retry). */
export function jwtProfileDisabled(): BrokerError {
  return new BrokerError('ERR_JWT_PROFILE_DISABLED', 'the JWT-SVID profile is administratively disabled on this broker', {
    status: 'unimplemented',
    publicMessage: 'JWT-SVID profile is disabled',
  });
}

/** How a stream ends when the broker stops (UNAVAILABLE). */
export function shuttingDown(): BrokerError {
  return new BrokerError('ERR_SHUTTING_DOWN', 'broker is shutting down', { status: 'unavailable', publicMessage: 'broker is shutting down' });
}

/** The front's security header (`broker.spiffe.io: true`, `workload.spiffe.io: true`) is there exactly once, or INVALID_ARGUMENT with `code`. */
export function requireSecurityHeader(metadata: Metadata, header: string, value: string, code: BrokerErrorCode): void {
  const got = metadata.get(header);
  if (got.length !== 1 || String(got[0]) !== value) {
    throw new BrokerError(code, `security header ${header}: ${value} is missing`, {
      status: 'invalid-argument',
      publicMessage: `missing security header ${header}: ${value}`,
    });
  }
}

/** Where a front's refusals go: its observer, its log, its ErrorInfo. */
export interface RefusalSink {
  /** The front's name in the log line (`Broker API`, `Workload API`). */
  readonly api: string;
  readonly logger: Logger;
  readonly observer?: SvidStreamObserver | undefined;
  readonly errorInfo: NonNullable<GrpcErrorOptions['errorInfo']>;
  /** Refusals by these statuses are the caller's doing and logged (as is an unreadable request). */
  readonly logged: ReadonlySet<ErrorStatus>;
}

/**
 * A refused call's gRPC error: counted by code, logged when it is the caller's doing (a status in
 * `sink.logged`, an unreadable request), mapped once by `toGrpcError`.
 */
export function refusal(sink: RefusalSink, rpc: string, err: unknown, peer: string): ReturnType<typeof toGrpcError> {
  const code = err instanceof BrokerError ? err.code : 'unexpected';
  sink.observer?.rejected?.(rpc, code);
  if (err instanceof BrokerError && (sink.logged.has(err.status) || err.code === 'ERR_REQUEST_MALFORMED')) {
    sink.logger.warn(`${sink.api} call refused`, { rpc, code, detail: err.message, peer });
  }
  return toGrpcError(err, sink.logger, { rpc }, { errorInfo: sink.errorInfo });
}
