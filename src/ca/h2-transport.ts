/**
 * The CA's TLS transports (`h2`, the default, and `http2`): the hot method,
 * `istio.v1.auth.IstioCertificateService/CreateCertificate`, is served directly on an HTTP/2
 * engine (h2-fronts.ts: certbroker's own, src/h2, for `h2`; node:http2's nghttp2 for `http2`;
 * no grpc-js on this path) for throughput, speaking the gRPC wire
 * protocol: HTTP/2 POST, 5-byte length-prefixed protobuf messages, `grpc-status`/`grpc-message`
 * trailers, `grpc-timeout` honoured. `grpc.health.v1.Health/Check` is answered here too. Every
 * other call (health Watch/List, reflection) is relayed stream-for-stream to a grpc-js server on
 * loopback (`fallbackPort`) when one is given, else answered UNIMPLEMENTED.
 *
 * CreateCertificate calls go to a `CreateCertificateHandler`: the CA's `CertificateService` (the
 * same one as on grpc-js), or the node broker's Istio CA front (src/broker/fronts/istio-ca),
 * which serves on this transport too (`startHttp2Server`, transports.ts). The CreateCertificate
 * request is decoded by hand (src/grpc/istio-ca-request.ts: the object protobufjs would give, at a
 * fraction of the cost), health requests with protobufjs; the response
 * (`repeated string cert_chain`) is framed by hand in one buffer (`certChainFrame`). Errors are
 * mapped by the one mapping (src/ops/grpc-errors.ts, as plain data) and written here as
 * trailers. Session, stream and TLS errors are logged, rate-limited (debug when a client
 * caused them, warn otherwise).
 *
 * The parts: src/grpc/wire-format.ts and h2-framing.ts (wire format), h2-request.ts (reading the request, bounded),
 * h2-respond.ts (writing answers), h2-limits.ts (connection cap, idle sessions, counts),
 * h2-relay.ts (the loopback fallback); limits for unauthenticated clients in limits.ts.
 */
import type { Socket } from 'node:net';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { systemClock, type Clock } from '../core/clock.js';
import { LogThrottle } from '../core/log-throttle.js';
import type { Logger } from '../core/log.js';
import type { HealthService } from '../grpc/health.js';
import { decodeIstioCertificateRequest } from '../grpc/istio-ca-request.js';
import { protobufRoot } from '../grpc/proto-load.js';
import { decodeStrict } from '../grpc/strict-decode.js';
import { retryPushbackValue } from '../grpc/retry-pushback.js';
import { frame, grpcTimeoutMs } from '../grpc/wire-format.js';
import type { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import type { GrpcStatusAnswer } from '../ops/grpc-errors.js';
import { listenTcp } from '../ops/listen.js';
import { HEALTH_CHECK_PATH, HEALTH_CHECK_REQUEST_TYPE, HEALTH_CHECK_RESPONSE_TYPE, HEALTH_PROTO, SERVING_STATUS_NUMBER, type HealthCheckRequest } from '../protocol/grpc-health.js';
import { RETRY_PUSHBACK_METADATA } from '../protocol/grpc-status.js';
import { CA_PROTO, CREATE_CERTIFICATE_PATH, type CallMetadata, type IstioCertificateRequest, type IstioCertificateResponse } from '../protocol/istio-ca.js';
import { MALFORMED_REQUEST } from './certificate-service.js';
import type { CallHeaders, ServerCall } from './grpc-call.js';
import { certChainFrame } from './h2-framing.js';
import { engineFront, nodeFront, type H2Engine } from './h2-fronts.js';
import { limitConnections } from './h2-limits.js';
import { LoopbackRelay } from './h2-relay.js';
import { readMessage, type ReadOptions } from './h2-request.js';
import { sendFrame, sendStatus, sendWireError, transportStatus } from './h2-respond.js';
import { OverloadHint } from './overload-hint.js';
import type { CaLimits } from './limits.js';
import type { CaMetrics } from './metrics.js';
import { LazyCallAbort, type CallSignal } from './call-signal.js';

/** One line per kind of session/stream error at most this often (the rest are counted). */
const ERROR_LOG_INTERVAL_MS = 10_000;

/**
 * What the transport hands `CreateCertificate` calls to (the CA's `CertificateService`, the
 * broker's Istio CA front). A request that is not a parsable IstioCertificateRequest arrives as
 * `MALFORMED_REQUEST`, for the handler to refuse.
 */
export interface CreateCertificateHandler {
  /**
   * Answers one call. With `cancellable`, `signal` aborts when the call ends before the answer
   * (the client reset the stream, or its `grpc-timeout` passed and the call was answered
   * DEADLINE_EXCEEDED); otherwise none is made. It is a CallAbort (call-signal.ts): `aborted` at
   * once, an AbortSignal (`abortSignalOf`) only when the handler asks for one.
   */
  createCertificate(request: IstioCertificateRequest, metadata: CallMetadata, signal?: CallSignal): Promise<IstioCertificateResponse>;
  /** The status to answer for a failed call (counted and logged by the handler). */
  rejection(err: unknown, peer: string): GrpcStatusAnswer;
  /** True: pass a signal to `createCertificate` (its work is worth stopping, e.g. a forwarded call). */
  readonly cancellable?: boolean;
}

export interface H2TransportOptions {
  readonly host: string;
  readonly port: number;
  readonly identity: RotatingServerIdentity;
  readonly handler: CreateCertificateHandler;
  readonly health: HealthService;
  readonly logger: Logger;
  readonly maxMessageBytes: number;
  /** Connection, stream, header and time bounds (see limits.ts). */
  readonly limits: CaLimits;
  /** Counts closed connections and refused streams; reports open connections and streams. */
  readonly metrics?: CaMetrics;
  /** A plaintext grpc-js server on 127.0.0.1 for every other method (health Watch, reflection). */
  readonly fallbackPort?: number;
  /** For the error log's rate limit (default the system clock). */
  readonly clock?: Clock;
}

export interface H2Transport {
  readonly port: number;
  /** Stops accepting, lets open calls finish (GOAWAY), destroys what is left at the deadline. */
  close(deadlineMs: number): Promise<'graceful' | 'forced'>;
}

interface Codec {
  readonly healthRequest: protobuf.Type;
  readonly healthResponse: protobuf.Type;
}

function loadCodec(): Codec {
  const root = protobufRoot([CA_PROTO, HEALTH_PROTO]);
  return {
    healthRequest: root.lookupType(HEALTH_CHECK_REQUEST_TYPE),
    healthResponse: root.lookupType(HEALTH_CHECK_RESPONSE_TYPE),
  };
}

/** The call's headers as the handler reads them (no grpc-js `Metadata` per call). */
function metadataFrom(headers: CallHeaders): CallMetadata {
  return {
    get(key) {
      const v = headers[key];
      if (v === undefined) return [];
      return typeof v === 'string' ? [v] : v;
    },
  };
}

const DEADLINE_EXCEEDED = transportStatus(GrpcStatus.DEADLINE_EXCEEDED, 'deadline exceeded');

/** What a method's function needs besides the call (built once, when the transport starts). */
interface MethodContext {
  readonly codec: Codec;
  /** The method's request bounds. */
  readonly read: ReadOptions;
}

function serveCreateCertificate(call: ServerCall, c: MethodContext & { readonly handler: CreateCertificateHandler }): void {
  const headers = call.headers;
  // A cancellable handler hears of a call that ended before its answer (reset, deadline); one
  // answered is not aborted. The AbortSignal itself is made only if the handler asks for it.
  let cancel: LazyCallAbort | undefined;
  let answered = false;
  if (c.handler.cancellable) {
    const ca = (cancel = new LazyCallAbort());
    call.onClose(() => {
      if (!answered) ca.abort();
    });
  }
  // As grpc-js does: at the client's deadline the call is answered DEADLINE_EXCEEDED; a result
  // that arrives later is dropped (the stream is no longer open by then).
  const timeoutMs = grpcTimeoutMs(headers['grpc-timeout']);
  const deadline =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          sendStatus(call, DEADLINE_EXCEEDED);
          cancel?.abort();
        }, timeoutMs);
  readMessage(call, c.read, headers['grpc-encoding'], (err, bytes) => {
    if (err) {
      clearTimeout(deadline);
      return sendWireError(call, err);
    }
    let request: IstioCertificateRequest;
    try {
      request = decodeIstioCertificateRequest(bytes!);
    } catch {
      // Not protobuf: the handler refuses it (INVALID_ARGUMENT, counted), before any authentication.
      request = MALFORMED_REQUEST;
    }
    c.handler.createCertificate(request, metadataFrom(headers), cancel).then(
      (res) => {
        answered = true;
        clearTimeout(deadline);
        sendFrame(call, certChainFrame(res.cert_chain));
      },
      (e: unknown) => {
        answered = true;
        clearTimeout(deadline);
        sendStatus(call, c.handler.rejection(e, call.peer));
      },
    );
  });
}

function serveHealthCheck(call: ServerCall, c: MethodContext & { readonly health: HealthService }): void {
  readMessage(call, c.read, call.headers['grpc-encoding'], (err, bytes) => {
    if (err) return sendWireError(call, err);
    let req: HealthCheckRequest;
    try {
      req = c.codec.healthRequest.toObject(decodeStrict(c.codec.healthRequest, bytes!), { defaults: true }) as HealthCheckRequest;
    } catch {
      // The health service is a library's (grpc-js answers this INTERNAL too, as statuscodes.md
      // says for "error parsing request proto"); only the CA's own method says INVALID_ARGUMENT.
      return sendStatus(call, transportStatus(GrpcStatus.INTERNAL, 'bad request'));
    }
    const st = c.health.status(req.service);
    if (st === undefined) sendStatus(call, transportStatus(GrpcStatus.NOT_FOUND, 'unknown service'));
    else sendFrame(call, frame(c.codec.healthResponse.encode({ status: SERVING_STATUS_NUMBER[st] }).finish()));
  });
}

/** Error codes a client causes by going away or misbehaving: logged at debug, not warn. */
const CLIENT_CAUSED = /^(ECONNRESET|EPIPE|ETIMEDOUT|ECONNABORTED|ERR_HTTP2_|ERR_SSL_|ERR_TLS_|HPE_)/u;

/** Session, stream and TLS errors, rate-limited per kind and code. */
function errorLog(logger: Logger, clock: Clock): (what: string, err: Error) => void {
  const throttle = new LogThrottle({ logger, clock, intervalMs: ERROR_LOG_INTERVAL_MS });
  return (what, err) => {
    const code = (err as NodeJS.ErrnoException).code ?? 'unknown';
    const level = CLIENT_CAUSED.test(code) ? 'debug' : 'warn';
    throttle.log(level, `${what}:${code}`, `http2 transport: ${what} error`, { code, err: err.message });
  };
}

/** The stream handler: bounds, method and content-type checks, then the method's function. */
function streamHandler(o: H2TransportOptions, codec: Codec, streams: () => number, relay: LoopbackRelay | undefined) {
  const limits = o.limits;
  const refused = o.metrics?.streamsRefused;
  const streamLimit = refused?.labels('stream_limit');
  const counts = { body_timeout: refused?.labels('body_timeout'), cancelled: refused?.labels('cancelled'), unreadable: refused?.labels('unreadable') };
  const onRefused: ReadOptions['onRefused'] = (reason) => counts[reason]?.inc();
  const bodyTimeoutMs = limits.requestBodyTimeoutMs;
  const create = { codec, handler: o.handler, read: { maxBytes: o.maxMessageBytes, bodyTimeoutMs, onRefused } };
  const healthCheck = { codec, health: o.health, read: { maxBytes: 4096, bodyTimeoutMs, onRefused } };
  const tooMany = transportStatus(GrpcStatus.RESOURCE_EXHAUSTED, 'too many open calls at the CA; retry later');
  // Turned away with a pushback of about the time the open calls take to drain (overload-hint.ts).
  const hint = new OverloadHint({ clock: o.clock ?? systemClock });
  const onAnswered = () => hint.completed();
  return (call: ServerCall): void => {
    if (streams() > limits.maxStreams) {
      streamLimit?.inc();
      call.discardBody();
      sendStatus(call, tooMany, { [RETRY_PUSHBACK_METADATA]: retryPushbackValue(hint.retryAfterMs(streams() - 1)) });
      return;
    }
    call.onClose(onAnswered);
    const headers = call.headers;
    const path = headers[':path'];
    if (headers[':method'] !== 'POST' || !String(headers['content-type'] ?? '').startsWith('application/grpc')) return call.refuseNotGrpc();
    if (path === CREATE_CERTIFICATE_PATH) return serveCreateCertificate(call, create);
    if (path === HEALTH_CHECK_PATH) return serveHealthCheck(call, healthCheck);
    if (relay) return relay.relay(call);
    call.discardBody();
    sendStatus(call, transportStatus(GrpcStatus.UNIMPLEMENTED, `method ${String(path)} is not served by this transport`));
  };
}

/**
 * Starts the transport on `engine`: node:http2 (`node`, the `http2` kind) or certbroker's own
 * HTTP/2 engine (`h2`, the `h2` kind); everything above the HTTP/2 streams is the same.
 */
export async function startH2Transport(o: H2TransportOptions, engine: H2Engine = 'node'): Promise<H2Transport> {
  const initial = o.identity.current();
  const logError = errorLog(o.logger, o.clock ?? systemClock);
  const relay = o.fallbackPort === undefined ? undefined : new LoopbackRelay({ port: o.fallbackPort, onError: (what, err) => logError(what, err) });
  let handle: (call: ServerCall) => void = () => undefined;
  const front = (engine === 'h2' ? engineFront : nodeFront)({ limits: o.limits, identity: initial, clock: o.clock ?? systemClock, onCall: (call) => handle(call), onError: logError });
  const server = front.server;
  // Counted and bounded before anything else sees a connection or a session (a stream: `counts.opened`).
  const counts = limitConnections(server, o.limits, o.metrics);
  front.onSession(counts.session);
  // Without an identity (none yet, or the last one withdrawn at its notAfter) a connection is
  // dropped at once, as grpc-js does: no TLS is attempted with a missing or expired certificate.
  let presenting = initial !== null;
  server.prependListener('connection', (socket: Socket) => {
    if (!presenting) socket.destroy();
  });
  const unsubscribe = o.identity.onUpdate((id) => {
    presenting = id !== null;
    if (id) server.setSecureContext({ cert: id.certificate, key: id.privateKey });
  });
  server.on('tlsClientError', (err) => logError('TLS handshake', err));
  const serve = streamHandler(o, loadCodec(), counts.streams, relay);
  handle = (call) => {
    counts.opened(call);
    serve(call);
  };

  const port = await listenTcp(server, o.port, o.host);

  return {
    port,
    close(deadlineMs) {
      unsubscribe();
      // Whichever comes first settles the promise; the later resolve is a no-op.
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          front.destroySessions();
          resolve('forced');
        }, Math.max(0, deadlineMs));
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve('graceful');
        });
        // GOAWAY: open streams finish, no new ones start.
        front.closeSessions();
        relay?.close();
      });
    },
  };
}
