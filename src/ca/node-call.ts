/**
 * `ServerCall` (grpc-call.ts) on a node:http2 server stream: the CA's `http2` transport kind.
 */
import { constants as h2, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { CallHeaders, RelayedCall, ResponseFields, ServerCall } from './grpc-call.js';

// Shared by every call (frozen: node:http2 copies, never writes, header objects).
const OK_HEADERS = Object.freeze({ [h2.HTTP2_HEADER_STATUS]: 200, 'content-type': 'application/grpc' });
const OK_TRAILERS = Object.freeze({ 'grpc-status': '0' });
const NOT_GRPC = Object.freeze({ [h2.HTTP2_HEADER_STATUS]: 415 });

/** Response fields as node:http2 takes them (a later repeated name replaces the earlier one). */
function headerObject(fields: ResponseFields): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of fields) out[k] = v;
  return out;
}

export class NodeCall implements ServerCall {
  readonly #stream: ServerHttp2Stream;
  readonly headers: CallHeaders;

  constructor(stream: ServerHttp2Stream, headers: IncomingHttpHeaders) {
    this.#stream = stream;
    this.headers = headers;
  }

  get peer(): string {
    const socket = this.#stream.session?.socket;
    return `${socket?.remoteAddress ?? '?'}:${socket?.remotePort ?? '?'}`;
  }
  get session(): object {
    return this.#stream.session ?? this.#stream;
  }

  readBody(onData: (chunk: Buffer) => void, onEnd: () => void, onClosedEarly: () => void): void {
    const s = this.#stream;
    s.on('data', onData);
    // node:http2 ends the readable side of a stream the client reset too ('aborted' first): that
    // is a call closed early, not a request body that ended.
    s.once('end', () => {
      if (!s.aborted) onEnd();
    });
    s.once('close', onClosedEarly);
  }
  discardBody(): void {
    this.#stream.resume();
  }
  onClose(listener: () => void): void {
    this.#stream.once('close', listener);
  }
  open(): boolean {
    const s = this.#stream;
    return !s.destroyed && !s.closed && !s.headersSent;
  }

  sendTrailersOnly(fields: ResponseFields): void {
    const s = this.#stream;
    s.respond(headerObject(fields), { endStream: true });
    if (!s.readableEnded) s.close(h2.NGHTTP2_NO_ERROR);
  }
  sendMessage(framed: Buffer): void {
    const s = this.#stream;
    s.respond(OK_HEADERS, { waitForTrailers: true });
    s.once('wantTrailers', () => s.sendTrailers(OK_TRAILERS));
    s.end(framed);
  }
  refuseNotGrpc(): void {
    const s = this.#stream;
    s.respond(NOT_GRPC, { endStream: true });
    if (!s.readableEnded) s.close(h2.NGHTTP2_NO_ERROR);
  }

  relayed(): RelayedCall {
    const s = this.#stream;
    return {
      body: s,
      respondHead(fields, trailersOnly, trailers) {
        if (s.destroyed || s.closed) return;
        if (trailersOnly) return s.respond(headerObject(fields), { endStream: true });
        s.respond(headerObject(fields), { waitForTrailers: true });
        s.once('wantTrailers', () => s.sendTrailers(headerObject(trailers())));
      },
      cancel: () => {
        if (!s.closed) s.close(h2.NGHTTP2_CANCEL);
      },
    };
  }
}
