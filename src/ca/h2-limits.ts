/**
 * The connection-level limits (limits.ts) on the http2 transport's node:http2 server: the
 * connection cap, the idle-session timeout, and the counts behind the open-connection and
 * open-stream gauges and the global stream cap. (The TLS handshake timeout and the HTTP/2
 * settings are server options, set where the server is created; the request-body timeout is
 * h2-request.ts'.)
 */
import type { Http2SecureServer, Http2Session, ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { CaLimits } from './limits.js';
import type { CaMetrics } from './metrics.js';

export interface ConnectionCounts {
  /** Streams open on the server right now (the one being handled included). */
  streams(): number;
  /**
   * Counts `stream` as open on the server and on its session until it closes (one 'close'
   * listener for both counts). The transport calls it first thing for every stream.
   */
  opened(stream: ServerHttp2Stream): void;
}

/**
 * Applies the cap and the idle timeout to `server` and counts what is open; every stream must be
 * passed to `opened` before it is handled.
 */
export function limitConnections(server: Http2SecureServer, limits: CaLimits, metrics: CaMetrics | undefined): ConnectionCounts {
  const closedOverLimit = metrics?.connectionsClosed.labels('limit');
  const closedHandshake = metrics?.connectionsClosed.labels('tls_handshake_timeout');
  const closedIdle = metrics?.connectionsClosed.labels('idle');
  const onIdle = () => closedIdle?.inc();
  let connections = 0;
  let streams = 0;
  metrics?.observeTransport(() => ({ connections, streams }));
  const idleWatches = new WeakMap<Http2Session, IdleWatch>();

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
  server.on('session', (s: Http2Session) => idleWatches.set(s, new IdleWatch(s, limits.idleSessionTimeoutMs, onIdle)));
  return {
    streams: () => streams,
    opened(stream) {
      streams++;
      const watch = stream.session && idleWatches.get(stream.session);
      watch?.opened();
      stream.once('close', () => {
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
  readonly #s: Http2Session;
  readonly #idleMs: number;
  readonly #onIdle: () => void;
  #open = 0;
  #timer: NodeJS.Timeout | undefined;

  constructor(s: Http2Session, idleMs: number, onIdle: () => void) {
    this.#s = s;
    this.#idleMs = idleMs;
    this.#onIdle = onIdle;
    this.#arm();
    s.once('close', () => clearTimeout(this.#timer));
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
