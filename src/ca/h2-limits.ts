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
}

/**
 * Applies the cap and the idle timeout to `server` and counts what is open. Call before adding
 * other 'stream' listeners, so a stream is counted before it is handled.
 */
export function limitConnections(server: Http2SecureServer, limits: CaLimits, metrics: CaMetrics | undefined): ConnectionCounts {
  const closedOverLimit = metrics?.connectionsClosed.labels('limit');
  const closedHandshake = metrics?.connectionsClosed.labels('tls_handshake_timeout');
  const closedIdle = metrics?.connectionsClosed.labels('idle');
  let connections = 0;
  let streams = 0;
  metrics?.observeTransport(() => ({ connections, streams }));

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
  server.on('session', (s: Http2Session) => closeWhenIdle(s, limits.idleSessionTimeoutMs, () => closedIdle?.inc()));
  server.on('stream', (stream: ServerHttp2Stream) => {
    streams++;
    stream.once('close', () => streams--);
  });
  return { streams: () => streams };
}

/**
 * Idle = no open stream (pings and settings do not count), as gRPC's MAX_CONNECTION_IDLE: a
 * session that carries nothing for `idleMs` gets GOAWAY and is closed. The timer is touched only
 * when the session goes from no stream to one and back, not per call.
 */
function closeWhenIdle(s: Http2Session, idleMs: number, onIdle: () => void): void {
  let open = 0;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    timer = setTimeout(() => {
      if (open > 0 || s.closed || s.destroyed) return;
      onIdle();
      s.close();
    }, idleMs);
    timer.unref();
  };
  arm();
  s.on('stream', (stream: ServerHttp2Stream) => {
    if (open++ === 0) clearTimeout(timer);
    stream.once('close', () => {
      if (--open === 0 && !s.closed && !s.destroyed) arm();
    });
  });
  s.once('close', () => clearTimeout(timer));
}
