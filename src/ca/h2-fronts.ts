/**
 * The HTTP/2 engine under the CA's TLS transport (h2-transport.ts), behind one small shape: a
 * `tls.Server` (for the shared connection cap, identity rotation and listening), every call as a
 * `ServerCall`, sessions for the idle timeout, and GOAWAY / destroy for the close.
 * - `nodeFront`: node:http2's `createSecureServer` (nghttp2) — the `http2` transport kind;
 * - `engineFront`: certbroker's own engine (src/h2) — the `h2` kind.
 * Both advertise the same SETTINGS (limits.ts: MAX_CONCURRENT_STREAMS, MAX_HEADER_LIST_SIZE) and
 * apply the same TLS handshake timeout; the engine also bounds the SETTINGS acknowledgement
 * (`settingsAckTimeoutMs`). `closeSessions` is node:http2's `session.close()`, or the engine's two-step GOAWAY (§6.8).
 */
import { constants as h2, createSecureServer, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { Server as TlsServer } from 'node:tls';
import type { Clock } from '../core/clock.js';
import { H2Server } from '../h2/server.js';
import type { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import { EngineCall } from './engine-call.js';
import type { ServerCall } from './grpc-call.js';
import type { IdleSession } from './h2-limits.js';
import { NodeCall } from './node-call.js';
import type { CaLimits } from './limits.js';

/** Which HTTP/2 implementation serves: node:http2 (`http2` kind) or certbroker's (`h2` kind). */
export type H2Engine = 'node' | 'h2';

export interface FrontOptions {
  readonly limits: CaLimits;
  readonly identity: ReturnType<RotatingServerIdentity['current']>;
  readonly clock: Clock;
  readonly onCall: (call: ServerCall) => void;
  /** Session, stream and socket errors (`what`: 'session', 'stream'). */
  readonly onError: (what: string, err: Error) => void;
}

export interface Front {
  readonly server: TlsServer;
  /** Hands every new session to `watch` (with how to hear that it closed). */
  onSession(watch: (s: IdleSession, whenClosed: (listener: () => void) => void) => void): void;
  /** GOAWAY on every session: open calls finish. */
  closeSessions(): void;
  destroySessions(): void;
}

export function nodeFront(o: FrontOptions): Front {
  const limits = o.limits;
  const server = createSecureServer({
    ...(o.identity ? { cert: o.identity.certificate, key: o.identity.privateKey } : {}),
    allowHTTP1: false,
    // Time from the TCP connection to a finished TLS handshake (node's default is 120 s).
    handshakeTimeout: limits.tlsHandshakeTimeoutMs,
    // Headers over maxHeaderListSize never reach the call: nghttp2 resets the stream with
    // ENHANCE_YOUR_CALM once its SETTINGS are acknowledged (before, the 'stream' check below),
    // which gRPC clients (grpc-js, grpc-go) report as RESOURCE_EXHAUSTED and do not retry;
    // clients that read the setting (grpc-go) fail locally before sending.
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: limits.maxHeaderListBytes },
  });
  const sessions = new Set<Http2Session>();
  let watch: Parameters<Front['onSession']>[0] | undefined;
  server.on('session', (s) => {
    sessions.add(s);
    s.on('error', (err) => o.onError('session', err));
    s.once('close', () => sessions.delete(s));
    watch?.(s, (listener) => s.once('close', listener));
  });
  const onStreamError = (err: Error) => o.onError('stream', err);
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
    stream.on('error', onStreamError);
    // node:http2 bounds a header list by the acknowledged settings only: a stream opened before
    // the client's SETTINGS ACK (hyper's, tonic's first calls go out with the preface) had no
    // bound. Checked here too, and reset as nghttp2 resets one over the bound.
    if (headerListSize(rawHeaders) > limits.maxHeaderListBytes) return stream.close(h2.NGHTTP2_ENHANCE_YOUR_CALM);
    o.onCall(new NodeCall(stream, headers));
  });
  return {
    server,
    onSession: (w) => (watch = w),
    closeSessions: () => sessions.forEach((s) => s.close()),
    destroySessions: () => sessions.forEach((s) => s.destroy()),
  };
}

/** RFC 9113 §6.5.2's size of a header list: each field's name and value octets plus 32. */
function headerListSize(rawHeaders: readonly string[]): number {
  let size = 0;
  for (const field of rawHeaders) size += field.length + 16; // name and value each carry half the 32
  return size;
}

export function engineFront(o: FrontOptions): Front {
  const limits = o.limits;
  let watch: Parameters<Front['onSession']>[0] | undefined;
  const engine = new H2Server({
    tls: { ...(o.identity ? { cert: o.identity.certificate, key: o.identity.privateKey } : {}), handshakeTimeout: limits.tlsHandshakeTimeoutMs },
    // The same SETTINGS as node:http2's; a header list over the limit is reset ENHANCE_YOUR_CALM, as nghttp2 does.
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: limits.maxHeaderListBytes },
    // §6.5.3 (node:http2 has no equivalent); the graceful close's PING wait keeps the engine's default.
    timeouts: { settingsAckMs: limits.settingsAckTimeoutMs },
    clock: o.clock,
    onConnection: (c) => watch?.(c, (listener) => c.onClose(listener)),
    onStream: (stream, c) => o.onCall(new EngineCall(stream, c)),
    onError: o.onError,
  });
  return {
    server: engine.tls,
    onSession: (w) => (watch = w),
    closeSessions: () => engine.connections.forEach((c) => c.close()),
    destroySessions: () => engine.destroyAll(),
  };
}
