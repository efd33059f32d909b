/**
 * `ServerCall` (grpc-call.ts) on a stream of certbroker's HTTP/2 engine (src/h2): the CA's `h2`
 * transport kind. A unary answer is one `reply` (HEADERS + DATA + trailers in one socket write);
 * the constant response head and trailers are HPACK-encoded once.
 */
import { encodeHeaderBlock } from '../h2/hpack.js';
import { ErrorCode } from '../h2/frames.js';
import type { H2Stream } from '../h2/stream.js';
import { H2StreamDuplex } from '../h2/stream-duplex.js';
import type { H2Connection } from '../h2/connection.js';
import type { CallHeaders, RelayedCall, ResponseFields, ServerCall } from './grpc-call.js';

const OK_HEAD = encodeHeaderBlock([
  [':status', '200'],
  ['content-type', 'application/grpc'],
]);
const OK_TRAILERS = encodeHeaderBlock([['grpc-status', '0']]);
const NOT_GRPC: ResponseFields = [[':status', '415']];

export class EngineCall implements ServerCall {
  readonly #stream: H2Stream;
  readonly session: H2Connection;

  constructor(stream: H2Stream, connection: H2Connection) {
    this.#stream = stream;
    this.session = connection;
  }

  get headers(): CallHeaders {
    return this.#stream.headers;
  }
  get peer(): string {
    return this.#stream.peer;
  }

  readBody(onData: (chunk: Buffer) => void, onEnd: () => void, onClosedEarly: () => void): void {
    const s = this.#stream;
    s.ondata = onData;
    s.onend = onEnd;
    s.onClose(onClosedEarly);
  }
  discardBody(): void {
    this.#stream.ondata = undefined;
  }
  onClose(listener: () => void): void {
    // Passed as is (it ignores the stream's close code): no wrapper per listener and call.
    this.#stream.onClose(listener);
  }
  open(): boolean {
    return !this.#stream.headersSent;
  }

  sendTrailersOnly(fields: ResponseFields): void {
    this.#stream.respond(fields, true);
  }
  sendMessage(framed: Buffer): void {
    this.#stream.reply(OK_HEAD, framed, OK_TRAILERS);
  }
  refuseNotGrpc(): void {
    this.#stream.respond(NOT_GRPC, true);
  }

  relayed(): RelayedCall {
    const s = this.#stream;
    let trailersOf: () => ResponseFields = () => [];
    const body = new H2StreamDuplex(s, () => trailersOf());
    // Writes after a reset (the upstream still piping) fail here; the reset itself ends the relay.
    body.on('error', () => undefined);
    return {
      body,
      respondHead(fields, trailersOnly, trailers) {
        trailersOf = trailers;
        s.respond(fields, trailersOnly);
      },
      cancel: () => s.reset(ErrorCode.CANCEL),
    };
  }
}
