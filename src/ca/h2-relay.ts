/**
 * The TLS transports' fallback (either HTTP/2 engine, through grpc-call.ts' `RelayedCall`): every call it does not serve itself (health Watch/List,
 * reflection) is relayed stream-for-stream, over one shared HTTP/2 session, to a plaintext
 * grpc-js server on loopback: request headers and messages up; response headers, messages and
 * trailers down; cancellation either way resets the other side.
 */
import { connect, constants as h2, type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { CallHeaders, ResponseFields, ServerCall } from './grpc-call.js';
import { sendStatus, transportStatus } from './h2-respond.js';

const UNAVAILABLE = transportStatus(GrpcStatus.UNAVAILABLE, 'service unavailable');

/** Fields that are not end-to-end: pseudo-headers, hop-by-hop ones (RFC 9113 §8.2.2), `host`. */
const NOT_RELAYED = /^(:|connection$|host$|keep-alive$|proxy-connection$|transfer-encoding$|upgrade$)/u;

/** Headers of one side minus the pseudo-headers and hop-by-hop ones. */
function endToEnd(headers: CallHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const k of Object.keys(headers)) {
    const v = headers[k];
    if (v === undefined || NOT_RELAYED.test(k)) continue;
    out[k] = v;
  }
  return out;
}

/** The same as ordered fields (a repeated header: one field per value), after `first`. */
function fieldsOf(headers: IncomingHttpHeaders, first: ResponseFields = []): ResponseFields {
  const out: Array<readonly [string, string]> = [...first];
  for (const [k, v] of Object.entries(endToEnd(headers))) {
    if (typeof v === 'string') out.push([k, v]);
    else for (const one of v) out.push([k, one]);
  }
  return out;
}

const NO_STATUS: ResponseFields = [
  ['grpc-status', String(GrpcStatus.INTERNAL)],
  ['grpc-message', 'upstream ended without status'],
];

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
  relay(call: ServerCall): void {
    const headers = call.headers;
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
      sendStatus(call, UNAVAILABLE);
      return;
    }
    const down = call.relayed();
    let trailers: ResponseFields | undefined;
    up.on('response', (h) => {
      const head = fieldsOf(h, [[':status', String(h[h2.HTTP2_HEADER_STATUS] ?? 200)]]);
      if (h['grpc-status'] !== undefined) {
        // Trailers-only response.
        down.respondHead(head, true, () => []);
        up.resume();
        return;
      }
      down.respondHead(head, false, () => trailers ?? NO_STATUS);
      up.pipe(down.body);
    });
    up.on('trailers', (t) => {
      trailers = fieldsOf(t);
    });
    up.on('error', (err) => {
      this.#onError('relayed stream', err);
      sendStatus(call, UNAVAILABLE);
    });
    down.body.pipe(up);
    call.onClose(() => {
      if (!up.closed) up.close(h2.NGHTTP2_CANCEL);
    });
    up.on('close', () => {
      if (up.rstCode !== undefined && up.rstCode !== h2.NGHTTP2_NO_ERROR) down.cancel();
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
