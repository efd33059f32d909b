/**
 * A raw-frame HTTP/2 client over TLS (ALPN h2) for the conformance suite: it sends exactly the
 * bytes a test says (the preface or not, frames of any type, flags, stream and payload, even
 * malformed ones) and reads the server's frames back one at a time, with a bounded wait for "the
 * next frame" or "the connection closed". Nothing here is the product's code except the HPACK
 * decoder (src/h2/hpack.ts), which turns the server's response header blocks into fields; the
 * request header blocks are encoded here with plain literals (`literalBlock`), so a server's
 * decoder is tested by an encoder it does not share.
 *
 *   const c = await FrameClient.connect({ port, rootsPem });
 *   await c.handshake();                      // preface + SETTINGS, the server's SETTINGS acked
 *   c.send(headersFrame(1, literalBlock(grpcRequestFields(path)), END_HEADERS));
 *   const f = await c.nextOf((f) => f.type === FrameType.RST_STREAM);
 *   c.close();
 *
 * Numbers: RFC 9113 §6 (frame types, flags), §6.5.2 (settings), §7 (error codes), §3.4 (preface).
 */
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { HpackDecoder } from '../../../src/h2/hpack.js';

/** RFC 9113 §3.4: the client connection preface. */
export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** RFC 9113 §6 frame types (and §11.2's registry). */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

/** RFC 9113 §6 flags (ACK shares bit 0 with END_STREAM). */
export const END_STREAM = 0x1;
export const ACK = 0x1;
export const END_HEADERS = 0x4;
export const PADDED = 0x8;
export const PRIORITY_FLAG = 0x20;

/** RFC 9113 §7 error codes. */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;

/** RFC 9113 §6.5.2 setting identifiers. */
export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** The name of an error code, for assertion messages. */
export function errorName(code: number): string {
  return Object.entries(ErrorCode).find(([, v]) => v === code)?.[0] ?? `0x${code.toString(16)}`;
}

export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly stream: number;
  readonly payload: Buffer;
  /**
   * For HEADERS (with its CONTINUATIONs joined: one event per header block): the decoded fields,
   * in order.
   */
  readonly fields?: ReadonlyArray<readonly [string, string]>;
}

/** One frame's bytes: the 9-byte header (RFC 9113 §4.1) and `payload`; `length` overrides the declared length. */
export function frameBytes(type: number, flags: number, stream: number, payload: Uint8Array = Buffer.alloc(0), length = payload.length): Buffer {
  const b = Buffer.alloc(9 + payload.length);
  b.writeUIntBE(length, 0, 3);
  b[3] = type;
  b[4] = flags;
  b.writeUInt32BE(stream >>> 0, 5);
  b.set(payload, 9);
  return b;
}

/** A SETTINGS frame (RFC 9113 §6.5) with `pairs` of identifier and value. */
export function settingsFrame(pairs: ReadonlyArray<readonly [number, number]> = [], flags = 0): Buffer {
  const p = Buffer.alloc(6 * pairs.length);
  pairs.forEach(([id, value], i) => {
    p.writeUInt16BE(id, 6 * i);
    p.writeUInt32BE(value >>> 0, 6 * i + 2);
  });
  return frameBytes(FrameType.SETTINGS, flags, 0, p);
}

export function pingFrame(data: Uint8Array, flags = 0): Buffer {
  return frameBytes(FrameType.PING, flags, 0, data);
}

export function windowUpdateFrame(stream: number, increment: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(increment >>> 0);
  return frameBytes(FrameType.WINDOW_UPDATE, 0, stream, p);
}

export function rstStreamFrame(stream: number, code: number): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code >>> 0);
  return frameBytes(FrameType.RST_STREAM, 0, stream, p);
}

export function goawayFrame(lastStream: number, code: number, debug = ''): Buffer {
  const p = Buffer.alloc(8 + Buffer.byteLength(debug));
  p.writeUInt32BE(lastStream >>> 0);
  p.writeUInt32BE(code >>> 0, 4);
  p.write(debug, 8);
  return frameBytes(FrameType.GOAWAY, 0, 0, p);
}

export function headersFrame(stream: number, block: Uint8Array, flags = END_HEADERS): Buffer {
  return frameBytes(FrameType.HEADERS, flags, stream, block);
}

export function continuationFrame(stream: number, block: Uint8Array, flags = END_HEADERS): Buffer {
  return frameBytes(FrameType.CONTINUATION, flags, stream, block);
}

export function dataFrame(stream: number, data: Uint8Array, flags = 0): Buffer {
  return frameBytes(FrameType.DATA, flags, stream, data);
}

/** RFC 7541 §5.1: an integer with an `n`-bit prefix, the prefix byte's high bits `first`. */
function hpackInteger(value: number, n: number, first: number): number[] {
  const max = (1 << n) - 1;
  if (value < max) return [first | value];
  const out = [first | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

/** RFC 7541 §5.2: a string literal without Huffman coding. */
function hpackString(s: string): Buffer {
  const bytes = Buffer.from(s, 'latin1');
  return Buffer.concat([Buffer.from(hpackInteger(bytes.length, 7, 0)), bytes]);
}

/**
 * A header block of "literal header field without indexing, new name" representations (RFC 7541
 * §6.2.2, first byte 0x00), strings not Huffman coded: the simplest encoding, no table state.
 */
export function literalBlock(fields: ReadonlyArray<readonly [string, string]>): Buffer {
  return Buffer.concat(fields.flatMap(([name, value]) => [Buffer.from([0x00]), hpackString(name), hpackString(value)]));
}

/** The request fields of a gRPC call to `path` (authority localhost), then `extra`. */
export function grpcRequestFields(path: string, extra: ReadonlyArray<readonly [string, string]> = []): Array<readonly [string, string]> {
  return [[':method', 'POST'], [':scheme', 'https'], [':authority', 'localhost'], [':path', path], ['content-type', 'application/grpc'], ['te', 'trailers'], ...extra];
}

/** A gRPC message: the uncompressed flag, the 4-byte length, `message` (gRPC's PROTOCOL-HTTP2 Length-Prefixed-Message). */
export function grpcMessage(message: Uint8Array): Buffer {
  const b = Buffer.alloc(5 + message.length);
  b.writeUInt32BE(message.length, 1);
  b.set(message, 5);
  return b;
}

/** What `next` yields when nothing more comes: the connection ended, or the wait ran out. */
export type End = 'closed' | 'timeout';

/** How long `next` waits for a frame by default: long enough for a loaded machine, bounded. */
export const FRAME_WAIT_MS = 10_000;

/**
 * One TLS connection speaking raw frames. Incoming bytes are cut into frames as they arrive; the
 * header blocks are decoded in arrival order (the HPACK dynamic table is per connection).
 */
export class FrameClient {
  readonly socket: TLSSocket;
  readonly #frames: Frame[] = [];
  #waiter: (() => void) | undefined;
  #buffer: Buffer = Buffer.alloc(0);
  #closed = false;
  /** The header block of a HEADERS frame still waiting for its CONTINUATIONs. */
  #pending: { flags: number; stream: number; parts: Buffer[] } | undefined;
  readonly #decoder = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 1 << 20 });
  /** A problem in what the server sent (a frame this client cannot make sense of). */
  problem: string | undefined;
  /** The server's SETTINGS as `handshake` read them. */
  serverSettings = new Map<number, number>();
  /** Bytes received so far. */
  received = 0;

  private constructor(socket: TLSSocket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => this.#onData(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.#closed = true;
      this.#wake();
    });
  }

  /** A TLS connection to 127.0.0.1:`port` trusting `rootsPem` (name localhost), ALPN h2 only. */
  static connect(o: { readonly port: number; readonly rootsPem: string }): Promise<FrameClient> {
    return new Promise((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: o.port, ca: o.rootsPem, servername: 'localhost', ALPNProtocols: ['h2'] });
      socket.once('error', reject);
      socket.once('secureConnect', () => {
        socket.off('error', reject);
        if (socket.alpnProtocol !== 'h2') {
          socket.destroy();
          reject(new Error(`ALPN chose ${String(socket.alpnProtocol)}, not h2`));
          return;
        }
        resolve(new FrameClient(socket));
      });
    });
  }

  /** True once the server closed (or the socket ended). */
  get closed(): boolean {
    return this.#closed;
  }

  send(...bytes: Uint8Array[]): void {
    if (!this.#closed) this.socket.write(bytes.length === 1 ? bytes[0]! : Buffer.concat(bytes));
  }

  /** Writes `bytes` and resolves when the socket took them (backpressure honoured); false if the connection is gone. */
  sendAndDrain(bytes: Uint8Array): Promise<boolean> {
    if (this.#closed || this.socket.destroyed) return Promise.resolve(false);
    return new Promise((resolve) => {
      if (this.socket.write(bytes)) resolve(true);
      else {
        const done = () => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve(!this.#closed);
        };
        this.socket.once('drain', done);
        this.socket.once('close', done);
      }
    });
  }

  /**
   * The preface and a SETTINGS frame with `settings`; reads up to the server's SETTINGS (RFC 9113
   * §3.4: its preface), acks it, and returns its settings. Frames before it are kept for `next`.
   */
  async handshake(settings: ReadonlyArray<readonly [number, number]> = []): Promise<Map<number, number>> {
    this.send(PREFACE, settingsFrame(settings));
    const f = await this.nextOf((x) => x.type === FrameType.SETTINGS && (x.flags & ACK) === 0);
    if (f === 'closed' || f === 'timeout') throw new Error(`no server SETTINGS: ${f}`);
    this.send(settingsFrame([], ACK));
    this.serverSettings = settingsOf(f);
    return this.serverSettings;
  }

  /** True when a frame of `type` is waiting to be read (a GOAWAY seen while still sending). */
  saw(type: number): boolean {
    return this.#frames.some((f) => f.type === type);
  }

  /** The next frame, or why there is none (closed, or nothing within `waitMs`). */
  async next(waitMs = FRAME_WAIT_MS): Promise<Frame | End> {
    const deadline = Date.now() + waitMs;
    while (this.#frames.length === 0) {
      if (this.#closed) return 'closed';
      const left = deadline - Date.now();
      if (left <= 0) return 'timeout';
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.#waiter = undefined;
          resolve();
        }, left);
        this.#waiter = () => {
          clearTimeout(timer);
          this.#waiter = undefined;
          resolve();
        };
      });
    }
    return this.#frames.shift()!;
  }

  /** The next frame `pred` accepts, skipping (and collecting into `skipped`) the others. */
  async nextOf(pred: (f: Frame) => boolean, waitMs = FRAME_WAIT_MS, skipped: Frame[] = []): Promise<Frame | End> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const f = await this.next(Math.max(0, deadline - Date.now()));
      if (f === 'closed' || f === 'timeout' || pred(f)) return f;
      skipped.push(f);
    }
  }

  /**
   * Reads until the connection ends: the GOAWAY's error code and last stream id if one came
   * (RFC 9113 §6.8), and whether the connection closed within the wait.
   */
  async goaway(waitMs = FRAME_WAIT_MS): Promise<{ readonly code?: number; readonly lastStream?: number; readonly closed: boolean; readonly frames: Frame[] }> {
    const frames: Frame[] = [];
    const f = await this.nextOf((x) => x.type === FrameType.GOAWAY, waitMs, frames);
    if (f === 'closed' || f === 'timeout') return { closed: f === 'closed', frames };
    return { code: f.payload.readUInt32BE(4), lastStream: f.payload.readUInt32BE(0) & 0x7fffffff, closed: (await this.drain(waitMs)) === 'closed', frames };
  }

  /** Skips frames until the connection closes or `waitMs` passes. */
  async drain(waitMs = FRAME_WAIT_MS): Promise<End> {
    const r = await this.nextOf(() => false, waitMs);
    return r === 'closed' ? 'closed' : 'timeout';
  }

  /** Frames for `stream` up to its end: its RST_STREAM, or a HEADERS/DATA with END_STREAM; a GOAWAY with an error, or not covering it, ends the wait too. */
  async streamEnd(stream: number, waitMs = FRAME_WAIT_MS): Promise<StreamOutcome> {
    return (await this.streamEnds([stream], waitMs)).get(stream)!;
  }

  /**
   * `streamEnd` for several streams at once (frames of other streams skipped): reads until each
   * has ended, or the connection, the wait or a GOAWAY that does not let it finish ended it.
   */
  async streamEnds(streams: readonly number[], waitMs = FRAME_WAIT_MS): Promise<Map<number, StreamOutcome>> {
    const open = new Map(streams.map((id) => [id, [] as Frame[]]));
    const ends = new Map<number, StreamOutcome>();
    const end = (id: number, o: StreamOutcome) => {
      ends.set(id, o);
      open.delete(id);
    };
    const deadline = Date.now() + waitMs;
    while (open.size > 0) {
      const f = await this.next(Math.max(0, deadline - Date.now()));
      if (f === 'closed' || f === 'timeout') {
        for (const [id, frames] of open) end(id, outcome(frames, f));
        break;
      }
      if (f.type === FrameType.GOAWAY) {
        // A graceful GOAWAY (NO_ERROR) covering a stream lets it finish (RFC 9113 §6.8).
        const graceful = f.payload.readUInt32BE(4) === ErrorCode.NO_ERROR;
        const last = f.payload.readUInt32BE(0) & 0x7fffffff;
        for (const [id, frames] of open) if (!graceful || last < id) end(id, outcome(frames, 'goaway', f));
        continue;
      }
      const frames = open.get(f.stream);
      if (!frames) continue;
      frames.push(f);
      if (f.type === FrameType.RST_STREAM) end(f.stream, outcome(frames, 'reset'));
      else if ((f.type === FrameType.HEADERS || f.type === FrameType.DATA) && (f.flags & END_STREAM) !== 0) end(f.stream, outcome(frames, 'ended'));
    }
    return ends;
  }

  /** Sends a PING with `data` and waits for its ACK (frames before it are skipped): proves the connection still works. */
  async ping(data: Buffer = Buffer.from('certbrkr'), waitMs = FRAME_WAIT_MS): Promise<boolean> {
    this.send(pingFrame(data));
    const f = await this.nextOf((x) => x.type === FrameType.PING && (x.flags & ACK) !== 0 && x.payload.equals(data), waitMs);
    return typeof f !== 'string';
  }

  close(): void {
    this.socket.destroy();
  }

  #wake(): void {
    this.#waiter?.();
  }

  #onData(chunk: Buffer): void {
    this.received += chunk.length;
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    while (this.#buffer.length >= 9) {
      const length = this.#buffer.readUIntBE(0, 3);
      if (this.#buffer.length < 9 + length) break;
      const f = { type: this.#buffer[3]!, flags: this.#buffer[4]!, stream: this.#buffer.readUInt32BE(5) & 0x7fffffff, payload: Buffer.from(this.#buffer.subarray(9, 9 + length)) };
      this.#buffer = this.#buffer.subarray(9 + length);
      this.#onFrame(f);
    }
    this.#wake();
  }

  #onFrame(f: Frame): void {
    if (f.type === FrameType.HEADERS) {
      this.#pending = { flags: f.flags, stream: f.stream, parts: [headerFragment(f)] };
    } else if (f.type === FrameType.CONTINUATION && this.#pending && this.#pending.stream === f.stream) {
      this.#pending.parts.push(f.payload);
    } else {
      if (this.#pending) this.problem ??= `a ${f.type} frame inside the server's header block on stream ${this.#pending.stream}`;
      this.#frames.push(f);
      return;
    }
    if ((f.flags & END_HEADERS) === 0) return;
    const { flags, stream, parts } = this.#pending;
    this.#pending = undefined;
    const fields: Array<readonly [string, string]> = [];
    try {
      this.#decoder.decode(Buffer.concat(parts), (name, value) => fields.push([name, value]));
    } catch (err) {
      this.problem ??= `the server's header block on stream ${stream} does not decode: ${(err as Error).message}`;
    }
    this.#frames.push({ type: FrameType.HEADERS, flags: flags | END_HEADERS, stream, payload: Buffer.concat(parts), fields });
  }
}

/** A SETTINGS frame's identifier/value pairs (RFC 9113 §6.5.1). */
export function settingsOf(f: Frame): Map<number, number> {
  const out = new Map<number, number>();
  for (let i = 0; i + 6 <= f.payload.length; i += 6) out.set(f.payload.readUInt16BE(i), f.payload.readUInt32BE(i + 2));
  return out;
}

/** A HEADERS payload without its padding and priority fields (RFC 9113 §6.2). */
function headerFragment(f: Frame): Buffer {
  let p = f.payload;
  let pad = 0;
  if (f.flags & PADDED) {
    pad = p[0] ?? 0;
    p = p.subarray(1);
  }
  if (f.flags & PRIORITY_FLAG) p = p.subarray(5);
  return p.subarray(0, Math.max(0, p.length - pad));
}

/** How a stream ended, seen from the client. */
export interface StreamOutcome {
  readonly how: 'reset' | 'ended' | 'goaway' | End;
  /** The stream's frames, in order. */
  readonly frames: readonly Frame[];
  /** RST_STREAM's code, or GOAWAY's. */
  readonly code?: number;
  /** The response's header fields, then the trailers', merged (later wins). */
  readonly fields: Readonly<Record<string, string>>;
  /** The DATA payloads, joined. */
  readonly body: Buffer;
}

function outcome(frames: Frame[], how: StreamOutcome['how'], goaway?: Frame): StreamOutcome {
  const fields: Record<string, string> = {};
  for (const f of frames) for (const [k, v] of f.fields ?? []) fields[k] = v;
  const rst = frames.find((f) => f.type === FrameType.RST_STREAM);
  const code = goaway ? goaway.payload.readUInt32BE(4) : rst?.payload.readUInt32BE(0);
  const body = Buffer.concat(frames.filter((f) => f.type === FrameType.DATA).map((f) => dataPayload(f)));
  return { how, frames, fields, body, ...(code === undefined ? {} : { code }) };
}

/** A DATA payload without its padding (RFC 9113 §6.1). */
export function dataPayload(f: Frame): Buffer {
  if ((f.flags & PADDED) === 0) return f.payload;
  const pad = f.payload[0] ?? 0;
  return f.payload.subarray(1, Math.max(1, f.payload.length - pad));
}
