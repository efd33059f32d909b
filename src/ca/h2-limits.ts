/**
 * The connection-level limits (limits.ts) on the TLS transports' server (node:http2's or
 * certbroker's engine's: both are a `tls.Server`): the connection cap, the idle-session
 * timeout, and the counts behind the open-connection and open-stream gauges and the global
 * stream cap. (The TLS handshake timeout and the HTTP/2 settings are server options, set where
 * the server is created; the request-body timeout is h2-request.ts'.)
 */
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import type { ServerCall } from './grpc-call.js';
import type { CaLimits } from './limits.js';
import type { CaMetrics } from './metrics.js';

export interface ConnectionCounts {
  /** Streams open on the server right now (the one being handled included). */
  streams(): number;
  /** A session (HTTP/2 connection) started: watched for idleness until `whenClosed` says it is gone. */
  session(s: IdleSession, whenClosed: (listener: () => void) => void): void;
  /**
   * Counts `call` as open on the server and on its session until it closes (one close
   * listener for both counts). The transport calls it first thing for every stream.
   */
  opened(call: ServerCall): void;
}

/** What the idle timeout needs of a session (node:http2's `Http2Session`, the engine's `H2Connection`). */
export interface IdleSession {
  readonly closed: boolean;
  readonly destroyed: boolean;
  /** Graceful close (GOAWAY). */
  close(): void;
}

/**
 * Applies the cap and the idle timeout to `server` and counts what is open; every stream must be
 * passed to `opened` before it is handled.
 */
export function limitConnections(server: TlsServer, limits: CaLimits, metrics: CaMetrics | undefined): ConnectionCounts {
  const closedOverLimit = metrics?.connectionsClosed.labels('limit');
  const closedHandshake = metrics?.connectionsClosed.labels('tls_handshake_timeout');
  const closedIdle = metrics?.connectionsClosed.labels('idle');
  const onIdle = () => closedIdle?.inc();
  let connections = 0;
  let streams = 0;
  metrics?.observeTransport(() => ({ connections, streams }));
  const idleWatches = new WeakMap<object, IdleWatch>();

  // Beyond the cap the kernel's accepted socket is closed before any JS object or TLS state
  // exists for it (net.Server 'drop').
  server.maxConnections = limits.maxConnections;
  server.on('drop', () => closedOverLimit?.inc());
  server.on('connection', (socket: Socket) => {
    connections++;
    socket.once('close', () => connections--);
  });
  server.on('tlsClientError', (err: NodeJS.ErrnoException) => {
    if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') closedHandshake?.inc();
  });
  return {
    streams: () => streams,
    session: (s, whenClosed) => idleWatches.set(s, new IdleWatch(s, limits.idleSessionTimeoutMs, onIdle, whenClosed)),
    opened(call) {
      streams++;
      const watch = idleWatches.get(call.session);
      watch?.opened();
      call.onClose(() => {
        streams--;
        watch?.closed();
      });
    },
  };
}

/**
 * Idle = no open stream (pings and settings do not count), as gRPC's MAX_CONNECTION_IDLE: a
 * session that carries nothing for `idleMs` gets GOAWAY and is closed. The timer is touched only
 * when the session goes from no stream to one and back, not per call.
 */
class IdleWatch {
  readonly #s: IdleSession;
  readonly #idleMs: number;
  readonly #onIdle: () => void;
  #open = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(s: IdleSession, idleMs: number, onIdle: () => void, whenClosed: (listener: () => void) => void) {
    this.#s = s;
    this.#idleMs = idleMs;
    this.#onIdle = onIdle;
    this.#arm();
    whenClosed(() => clearTimeout(this.#timer));
  }

  opened(): void {
    if (this.#open++ === 0) clearTimeout(this.#timer);
  }

  closed(): void {
    if (--this.#open === 0 && !this.#s.closed && !this.#s.destroyed) this.#arm();
  }

  #arm(): void {
    this.#timer = setTimeout(() => {
      if (this.#open > 0 || this.#s.closed || this.#s.destroyed) return;
      this.#onIdle();
      this.#s.close();
    }, this.#idleMs);
    this.#timer.unref();
  }
}
