/**
 * The http2 transport's fallback: every call it does not serve itself (health Watch/List,
 * reflection) is relayed stream-for-stream, over one shared HTTP/2 session, to a plaintext
 * grpc-js server on loopback: request headers and messages up; response headers, messages and
 * trailers down; cancellation either way resets the other side.
 */
import { connect, constants as h2, type ClientHttp2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { sendStatus, transportStatus } from './h2-respond.js';

const UNAVAILABLE = transportStatus(GrpcStatus.UNAVAILABLE, 'service unavailable');

/** Headers of one side minus the pseudo-headers and hop-by-hop ones. */
function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || k.startsWith(':') || k === 'connection' || k === 'host') continue;
    out[k] = v;
  }
  return out;
}

export class LoopbackRelay {
  readonly #port: number;
  readonly #onError: (what: string, err: Error) => void;
  #session: ClientHttp2Session | undefined;

  /** `onError` hears of upstream session and stream errors (a relayed call is answered UNAVAILABLE). */
  constructor(options: { readonly port: number; readonly onError: (what: string, err: Error) => void }) {
    this.#port = options.port;
    this.#onError = options.onError;
  }

  /** Relays one call of any kind (unary, server/client/bidi streaming). */
  relay(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    let up;
    try {
      up = this.#upstream().request({
        ...endToEnd(headers),
        [h2.HTTP2_HEADER_METHOD]: 'POST',
        [h2.HTTP2_HEADER_PATH]: String(headers[h2.HTTP2_HEADER_PATH]),
      });
    } catch (err) {
      // The loopback session was closing (shutdown): answer instead of throwing.
      this.#onError('relay request', err as Error);
      sendStatus(stream, UNAVAILABLE);
      return;
    }
    let trailers: Record<string, string | string[]> | undefined;
    up.on('response', (h) => {
      if (stream.destroyed || stream.closed) return;
      const hs = { ...endToEnd(h), [h2.HTTP2_HEADER_STATUS]: h[h2.HTTP2_HEADER_STATUS] ?? 200 };
      if (h['grpc-status'] !== undefined) {
        // Trailers-only response.
        stream.respond(hs, { endStream: true });
        up.resume();
        return;
      }
      stream.respond(hs, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers(trailers ?? { 'grpc-status': String(GrpcStatus.INTERNAL), 'grpc-message': 'upstream ended without status' }));
      up.pipe(stream);
    });
    up.on('trailers', (t) => {
      trailers = endToEnd(t);
    });
    up.on('error', (err) => {
      this.#onError('relayed stream', err);
      sendStatus(stream, UNAVAILABLE);
    });
    stream.pipe(up);
    stream.on('close', () => {
      if (!up.closed) up.close(h2.NGHTTP2_CANCEL);
    });
    up.on('close', () => {
      if (!stream.closed && up.rstCode !== undefined && up.rstCode !== h2.NGHTTP2_NO_ERROR) stream.close(h2.NGHTTP2_CANCEL);
    });
  }

  /** Closes the loopback session (GOAWAY: relayed calls in progress finish). */
  close(): void {
    this.#session?.close();
  }

  /** The shared session, re-opened when it went away. */
  #upstream(): ClientHttp2Session {
    const current = this.#session;
    if (current && !current.closed && !current.destroyed) return current;
    const s = connect(`http://127.0.0.1:${this.#port}`);
    s.on('error', (err) => this.#onError('loopback session', err));
    s.on('close', () => {
      if (this.#session === s) this.#session = undefined;
    });
    this.#session = s;
    return s;
  }
}
