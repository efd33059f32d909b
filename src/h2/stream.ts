/**
 * One HTTP/2 stream of certbroker's server engine, seen from the application: the request's
 * fields, callbacks for its body (`ondata`, `onend`) and its end (`onClose`), and the response
 * side — `respond` (HEADERS), `write` (DATA within the peer's flow-control windows, queued
 * beyond them and resumed on WINDOW_UPDATE), `end` (trailers or END_STREAM), `reply` (all three
 * at once: one socket write when the window allows) and `reset` (RST_STREAM). Plain callbacks,
 * no EventEmitter or Readable per stream: a unary gRPC call costs a few object fields here.
 *
 * The connection (connection.ts) owns the receive side and calls the `@internal` members.
 */
import { ErrorCode, Flag, FRAME_HEADER_BYTES, FrameType, writeFrameHeader } from './frames.js';
import type { FieldMap } from './request-headers.js';

/** Response fields, in order (pseudo-header fields first). */
export type HeaderFields = ReadonlyArray<readonly [string, string]>;
/** Fields, or a block already HPACK-encoded (by an `HpackEncoder`: no dynamic table). */
export type HeaderBlock = HeaderFields | Uint8Array;

/** What a stream needs of its connection (connection.ts implements it). */
export interface StreamHost {
  /** HPACK-encodes response fields, or passes a pre-encoded block (with a table size update first when one is due). */
  encode(head: HeaderBlock): Uint8Array;
  /** Appends bytes to the connection's next socket write. */
  queue(bytes: Buffer): void;
  /** The connection's send window (shared by every stream). */
  connectionWindow: number;
  readonly peerMaxFrameSize: number;
  /** The stream waits for a WINDOW_UPDATE (connection or its own). */
  blocked(stream: H2Stream): void;
  /** The stream returned window (`recvCredit`): add it to `recvWindow` once the update is out. */
  credited(stream: H2Stream): void;
  /** The stream is over: forget it; `rst` is the RST_STREAM code to send, if any. */
  streamClosed(stream: H2Stream, code: number, rst: number | undefined): void;
  /** The stream receive window we advertise (WINDOW_UPDATE once half of it is consumed). */
  readonly streamWindow: number;
  /** The peer's address, for logs. */
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
}

/** Writes `block` as HEADERS (+ CONTINUATION frames beyond the peer's frame size). */
function queueHeaderBlock(host: StreamHost, id: number, block: Uint8Array, endStream: boolean): void {
  const max = host.peerMaxFrameSize;
  const end = endStream ? Flag.END_STREAM : 0;
  if (block.length <= max) {
    const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + block.length);
    writeFrameHeader(out, 0, block.length, FrameType.HEADERS, end | Flag.END_HEADERS, id);
    out.set(block, FRAME_HEADER_BYTES);
    host.queue(out);
    return;
  }
  for (let at = 0; at < block.length; at += max) {
    const part = block.subarray(at, Math.min(block.length, at + max));
    const last = at + max >= block.length;
    const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + part.length);
    const type = at === 0 ? FrameType.HEADERS : FrameType.CONTINUATION;
    writeFrameHeader(out, 0, part.length, type, (at === 0 ? end : 0) | (last ? Flag.END_HEADERS : 0), id);
    out.set(part, FRAME_HEADER_BYTES);
    host.queue(out);
  }
}

export class H2Stream {
  readonly id: number;
  /** The request's fields (`:method`, `:path`, … and the regular ones). */
  readonly headers: FieldMap;
  /** Request body bytes, as they arrive (the chunk may be a view into a socket buffer: copy to keep it past the call). */
  ondata: ((chunk: Buffer) => void) | undefined;
  /** The request body ended (END_STREAM). */
  onend: (() => void) | undefined;
  /** Trailers of the request, if it sent any (before `onend`). */
  ontrailers: ((fields: FieldMap) => void) | undefined;

  /** @internal What the peer may still send on this stream (our window for it). */
  recvWindow: number;
  /** @internal Bytes received and consumed but not yet returned by WINDOW_UPDATE. */
  recvUnacked = 0;
  /** @internal Bytes returned by a WINDOW_UPDATE not yet added to `recvWindow`. */
  recvCredit = 0;
  /** @internal The `content-length` declared, or -1; and the body bytes seen. */
  declaredLength: number;
  receivedLength = 0;
  /** @internal Our window to send on this stream (the peer's, per its SETTINGS and WINDOW_UPDATEs). */
  sendWindow: number;
  /** @internal The application returns consumed bytes itself (`consume`), see `manualFlowControl`. */
  manualFlow = false;

  readonly #host: StreamHost;
  #remoteEnded = false;
  #localEnded = false;
  #closed = false;
  #headersSent = false;
  #rstCode: number | undefined;
  /** DATA waiting for window, then what ends the stream once it is out. */
  #pending: Buffer[] = [];
  #ending: { trailers: Uint8Array | undefined } | undefined;
  #closeListeners: Array<(code: number) => void> | undefined;

  /** @internal Made by the connection when a request's HEADERS arrive. */
  constructor(host: StreamHost, id: number, headers: FieldMap, declaredLength: number, recvWindow: number, sendWindow: number) {
    this.#host = host;
    this.id = id;
    this.headers = headers;
    this.declaredLength = declaredLength;
    this.recvWindow = recvWindow;
    this.sendWindow = sendWindow;
  }

  /** The peer, `address:port`. */
  get peer(): string {
    return `${this.#host.remoteAddress ?? '?'}:${this.#host.remotePort ?? '?'}`;
  }
  /** The response head was sent (or the stream is over): a second answer is not possible. */
  get headersSent(): boolean {
    return this.#headersSent;
  }
  get closed(): boolean {
    return this.#closed;
  }
  /** The request body has ended (END_STREAM received). */
  get remoteEnded(): boolean {
    return this.#remoteEnded;
  }
  /** The RST_STREAM code the stream ended with (either side), or undefined. */
  get rstCode(): number | undefined {
    return this.#rstCode;
  }

  /** Calls `listener` once when the stream is over (code: NO_ERROR, or the reset's). */
  onClose(listener: (code: number) => void): void {
    if (this.#closed) return listener(this.#rstCode ?? ErrorCode.NO_ERROR);
    (this.#closeListeners ??= []).push(listener);
  }

  /** Application flow control: the stream's window is only replenished by `consume`. */
  manualFlowControl(): void {
    this.manualFlow = true;
  }

  /** Gives `n` consumed bytes back to the peer (WINDOW_UPDATE when worth one). */
  consume(n: number): void {
    if (this.#closed || this.#remoteEnded) return;
    this.recvUnacked += n;
    if (this.recvUnacked >= this.#host.streamWindow / 2) {
      // Counted once the update is written (the connection applies it): DATA in the same read
      // was sent before the peer could see it, and may not use it (RFC 9113 §6.9.1).
      this.recvCredit += this.recvUnacked;
      this.#host.credited(this);
      const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
      writeFrameHeader(out, 0, 4, FrameType.WINDOW_UPDATE, 0, this.id);
      out.writeUInt32BE(this.recvUnacked, FRAME_HEADER_BYTES);
      this.recvUnacked = 0;
      this.#host.queue(out);
    }
  }

  /** Sends the response head; `endStream`: it is the whole response (e.g. gRPC trailers-only). */
  respond(head: HeaderBlock, endStream = false): void {
    if (this.#headersSent || this.#closed) return;
    this.#headersSent = true;
    const block = this.#host.encode(head);
    queueHeaderBlock(this.#host, this.id, block, endStream);
    if (endStream) this.#endedLocally();
  }

  /** Sends body bytes (after `respond`), as far as the windows allow; the rest waits. */
  write(data: Uint8Array): void {
    if (this.#closed || this.#ending || !this.#headersSent || data.length === 0) return;
    this.#pending.push(Buffer.isBuffer(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.length));
    this.flush();
  }

  /** Ends the response: `trailers` (HEADERS with END_STREAM) or an empty DATA with END_STREAM, after the queued body. */
  end(trailers?: HeaderBlock): void {
    if (this.#closed || this.#ending || !this.#headersSent) return;
    this.#ending = { trailers: trailers === undefined ? undefined : this.#host.encode(trailers) };
    this.flush();
  }

  /** The whole response at once: head, optional body, trailers (queued into one socket write). */
  reply(head: HeaderBlock, body: Uint8Array | undefined, trailers: HeaderBlock | undefined): void {
    if (this.#headersSent || this.#closed) return;
    if (body === undefined && trailers === undefined) return this.respond(head, true);
    if (body !== undefined && trailers !== undefined && this.#replyInOne(head, body, trailers)) return;
    this.respond(head);
    if (body) this.write(body);
    this.end(trailers);
  }

  /**
   * `reply` when everything fits at once (the body within both send windows and one frame, each
   * header block in one frame): HEADERS, DATA and trailers written into one buffer, not three
   * frames plus a pending queue. False (nothing sent) when the windows or the frame size do not
   * allow it, for the general path.
   */
  #replyInOne(head: HeaderBlock, body: Uint8Array, trailers: HeaderBlock): boolean {
    const host = this.#host;
    const max = host.peerMaxFrameSize;
    const n = body.length;
    if (n === 0 || n > this.sendWindow || n > host.connectionWindow || n > max) return false;
    const headBlock = host.encode(head);
    const trailerBlock = host.encode(trailers);
    if (headBlock.length > max || trailerBlock.length > max) return this.#replyEncoded(headBlock, body, trailerBlock);
    const size = 3 * FRAME_HEADER_BYTES + headBlock.length + n + trailerBlock.length;
    const out = Buffer.allocUnsafe(size);
    let at = 0;
    writeFrameHeader(out, at, headBlock.length, FrameType.HEADERS, Flag.END_HEADERS, this.id);
    out.set(headBlock, (at += FRAME_HEADER_BYTES));
    writeFrameHeader(out, (at += headBlock.length), n, FrameType.DATA, 0, this.id);
    out.set(body, (at += FRAME_HEADER_BYTES));
    writeFrameHeader(out, (at += n), trailerBlock.length, FrameType.HEADERS, Flag.END_STREAM | Flag.END_HEADERS, this.id);
    out.set(trailerBlock, at + FRAME_HEADER_BYTES);
    this.#headersSent = true;
    this.sendWindow -= n;
    host.connectionWindow -= n;
    host.queue(out);
    this.#endedLocally();
    return true;
  }

  /** `reply` with a header block larger than a frame: the general path (CONTINUATION) with the blocks already encoded (the encoder passes a lone encoded block through). */
  #replyEncoded(headBlock: Uint8Array, body: Uint8Array, trailerBlock: Uint8Array): boolean {
    this.respond(headBlock);
    this.write(body);
    this.end(trailerBlock);
    return true;
  }

  /** Resets the stream (RST_STREAM with `code`); its close listeners hear `code`. */
  reset(code: number = ErrorCode.CANCEL): void {
    if (this.#closed) return;
    this.#close(code, code);
  }

  /** @internal Writes what the windows allow; registers as blocked otherwise. */
  flush(): void {
    const host = this.#host;
    while (this.#pending.length > 0) {
      const allowed = Math.min(this.sendWindow, host.connectionWindow, host.peerMaxFrameSize);
      if (allowed <= 0) return host.blocked(this);
      const head = this.#pending[0]!;
      const n = Math.min(allowed, head.length);
      const last = n === head.length && this.#pending.length === 1 && this.#ending !== undefined && this.#ending.trailers === undefined;
      const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + n);
      writeFrameHeader(out, 0, n, FrameType.DATA, last ? Flag.END_STREAM : 0, this.id);
      head.copy(out, FRAME_HEADER_BYTES, 0, n);
      host.queue(out);
      this.sendWindow -= n;
      host.connectionWindow -= n;
      if (n === head.length) this.#pending.shift();
      else this.#pending[0] = head.subarray(n);
      if (last) return this.#endedLocally();
    }
    const ending = this.#ending;
    if (ending === undefined || this.#localEnded) return;
    if (ending.trailers) queueHeaderBlock(host, this.id, ending.trailers, true);
    else {
      const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
      writeFrameHeader(out, 0, 0, FrameType.DATA, Flag.END_STREAM, this.id);
      host.queue(out);
    }
    this.#endedLocally();
  }

  /** @internal The request body ended. */
  remoteEnd(): void {
    if (this.#remoteEnded) return;
    this.#remoteEnded = true;
    this.onend?.();
    if (this.#localEnded && !this.#closed) this.#close(ErrorCode.NO_ERROR, undefined);
  }

  /** @internal The peer reset the stream, or the connection is going away (`code` for the listeners). */
  abort(code: number): void {
    if (!this.#closed) this.#close(code, undefined);
  }

  #endedLocally(): void {
    this.#localEnded = true;
    this.#pending = [];
    // A complete response while the client still sends: RST_STREAM(NO_ERROR) tells it to stop (RFC 9113 §8.1).
    if (this.#remoteEnded) this.#close(ErrorCode.NO_ERROR, undefined);
    else this.#close(ErrorCode.NO_ERROR, ErrorCode.NO_ERROR);
  }

  #close(code: number, rst: number | undefined): void {
    this.#closed = true;
    this.#headersSent = true;
    if (code !== ErrorCode.NO_ERROR || rst !== undefined) this.#rstCode = code;
    this.#pending = [];
    this.ondata = undefined;
    this.#host.streamClosed(this, code, rst);
    const listeners = this.#closeListeners;
    this.#closeListeners = undefined;
    if (listeners) for (const l of listeners) l(code);
  }
}
