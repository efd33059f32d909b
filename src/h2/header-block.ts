/**
 * A request's field blocks on the server (RFC 9113 §4.3, §6.2, §6.10, §8.1-8.3), from the first
 * HEADERS frame to the stream it opens: the HEADERS payload rules (padding, the priority fields),
 * the block assembled from HEADERS and CONTINUATION frames, bounded (the fragments of one block
 * may not pass `maxBlockBytes` nor `maxBlockFrames` frames: a CONTINUATION flood; no other frame
 * may come between them, which the connection checks before it dispatches a frame), the HPACK
 * decode, the stream-id rules for a new stream (§5.1, §5.1.1, §6.8) and the request's header
 * checks (`FieldCollector`, request-headers.ts); a block that passes them is handed to
 * `HeaderHost.openStream`. A second block on an open stream is its trailers (`receiveTrailers`).
 * A block that cannot be decoded is a connection error (`H2ConnectionError`, thrown): HPACK is
 * out of sync; a request that breaks a rule on its own is refused (RST_STREAM, within the reset
 * budget). Called per frame by connection.ts with its state passed in, as stream-control.ts is.
 */
import { ErrorCode, Flag, H2ConnectionError } from './frames.js';
import { HpackError, type HpackDecoder } from './hpack.js';
import { FieldCollector } from './request-headers.js';
import type { H2Stream } from './stream.js';

/** The connection's side of a request's field blocks (connection.ts). */
export interface HeaderHost {
  /** The highest client stream id used so far (§5.1.1); a new stream's id becomes it. */
  lastStreamId: number;
  /** The final GOAWAY is out: new streams (above its last stream id) are ignored (§6.8). */
  readonly goawaySent: boolean;
  /** The bounds of one block in progress: its fragments' bytes and its frames (HEADERS + CONTINUATIONs). */
  readonly maxBlockBytes: number;
  readonly maxBlockFrames: number;
  /** The stream id was reset by us lately (its HEADERS may have crossed our RST_STREAM). */
  wasReset(sid: number): boolean;
  /** The stream id was used by a stream that ended lately. */
  wasClosed(sid: number): boolean;
  /** Sends RST_STREAM for a stream id without an `H2Stream`, remembered as reset (§5.4.2). */
  rst(sid: number, code: number): void;
  /** Counts a stream reset before its answer; false past the reset budget. */
  chargeReset(): boolean;
  /** A new request passed every check (`collector` finished without a problem): the stream opens. */
  openStream(sid: number, collector: FieldCollector, endStream: boolean): void;
}

/**
 * A HEADERS frame (the connection checked that no block was in progress): the block it starts,
 * still in progress without END_HEADERS (returned: CONTINUATIONs follow), else received now.
 */
export function receiveHeaders(c: HeaderHost, streams: ReadonlyMap<number, H2Stream>, decoder: HpackDecoder, buf: Buffer, at: number, length: number, flags: number, sid: number): BlockAssembly | undefined {
  if (sid === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS on stream 0');
  if ((sid & 1) === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'even stream id from a client');
  const payload = headersPayload(buf, at, length, flags);
  const assembly = new BlockAssembly(sid, flags, payload, c.maxBlockBytes, c.maxBlockFrames);
  if (!(flags & Flag.END_HEADERS)) return assembly;
  receiveBlock(c, streams, decoder, assembly);
  return undefined;
}

/** A CONTINUATION frame of the block in progress `a`: the block, still in progress (returned), or complete and received now. */
export function receiveContinuation(c: HeaderHost, streams: ReadonlyMap<number, H2Stream>, decoder: HpackDecoder, a: BlockAssembly | undefined, buf: Buffer, at: number, length: number, flags: number, sid: number): BlockAssembly | undefined {
  if (!a || a.streamId !== sid) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'CONTINUATION without its HEADERS');
  if (!a.add(buf.subarray(at, at + length), flags)) return a;
  receiveBlock(c, streams, decoder, a);
  return undefined;
}

/** A complete block: the trailers of an open stream, or a new request checked and opened (or refused, or ignored). */
function receiveBlock(c: HeaderHost, streams: ReadonlyMap<number, H2Stream>, decoder: HpackDecoder, a: BlockAssembly): void {
  const sid = a.streamId;
  const existing = streams.get(sid);
  const collector = new FieldCollector(existing !== undefined);
  const withinSize = decodeBlock(decoder, a.block(), collector);
  if (existing) return receiveTrailers(existing, a.flags, withinSize, collector);
  if (sid <= c.lastStreamId) {
    // A closed stream (or one we reset: its HEADERS may have crossed our RST_STREAM).
    if (c.wasReset(sid)) return;
    // A stream that ended is closed (§5.1); a lower id never used is out of order (§5.1.1).
    if (c.wasClosed(sid)) throw new H2ConnectionError(ErrorCode.STREAM_CLOSED, 'HEADERS on a closed stream');
    throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'stream id lower than one already used');
  }
  c.lastStreamId = sid;
  if (c.goawaySent) return; // above the GOAWAY's last stream id: ignored (§6.8)
  if (a.dependsOn === sid) return refuse(c, sid, ErrorCode.PROTOCOL_ERROR);
  if (!withinSize) return refuse(c, sid, ErrorCode.ENHANCE_YOUR_CALM);
  if (collector.finish() !== undefined) return refuse(c, sid, ErrorCode.PROTOCOL_ERROR);
  c.openStream(sid, collector, (a.flags & Flag.END_STREAM) !== 0);
}

/** Resets a stream that never opened (refused or malformed), within the reset budget. */
export function refuse(c: HeaderHost, sid: number, code: number): void {
  c.rst(sid, code);
  if (!c.chargeReset()) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many refused or reset streams');
}

/** HEADERS payload facts: where the fragment is and the priority dependency, if any. */
export interface HeadersPayload {
  readonly fragment: Buffer;
  /** The stream this one depends on (PRIORITY flag), or -1. */
  readonly dependsOn: number;
}

/** Strips padding and the priority fields from a HEADERS payload (`buf[at, at+length)`). */
export function headersPayload(buf: Buffer, at: number, length: number, flags: number): HeadersPayload {
  let start = at;
  let end = at + length;
  if (flags & Flag.PADDED) {
    if (length < 1) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'HEADERS too short for its padding length');
    const pad = buf[start]!;
    start++;
    if (pad > end - start) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'HEADERS padding longer than its payload');
    end -= pad;
  }
  let dependsOn = -1;
  if (flags & Flag.PRIORITY) {
    if (end - start < 5) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'HEADERS too short for its priority fields');
    dependsOn = buf.readUInt32BE(start) & 0x7fff_ffff;
    start += 5;
  }
  return { fragment: buf.subarray(start, end), dependsOn };
}

/** One field block in progress (HEADERS without END_HEADERS, then CONTINUATIONs). */
export class BlockAssembly {
  readonly streamId: number;
  /** The HEADERS frame's flags (END_STREAM matters once the block is complete). */
  readonly flags: number;
  readonly dependsOn: number;
  readonly #parts: Buffer[];
  #bytes: number;
  #frames = 1;
  readonly #maxBytes: number;
  readonly #maxFrames: number;

  constructor(streamId: number, flags: number, first: HeadersPayload, maxBytes: number, maxFrames: number) {
    this.streamId = streamId;
    this.flags = flags;
    this.dependsOn = first.dependsOn;
    this.#maxBytes = maxBytes;
    this.#maxFrames = maxFrames;
    // Copied: the socket chunk it came in is not kept past this read.
    this.#parts = [Buffer.from(first.fragment)];
    this.#bytes = first.fragment.length;
    this.#check();
  }

  /** Adds a CONTINUATION fragment; true when it ended the block (END_HEADERS). */
  add(fragment: Buffer, flags: number): boolean {
    this.#frames++;
    this.#bytes += fragment.length;
    this.#check();
    this.#parts.push(Buffer.from(fragment));
    return (flags & Flag.END_HEADERS) !== 0;
  }

  /** The whole block. */
  block(): Buffer {
    return this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, this.#bytes);
  }

  #check(): void {
    if (this.#bytes > this.#maxBytes) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'header block too large');
    if (this.#frames > this.#maxFrames) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many CONTINUATION frames');
  }
}

/** A second field block on an open stream: its trailers (§8.1). They must end the stream, be well-formed, and the body must match content-length. */
export function receiveTrailers(stream: H2Stream, flags: number, withinSize: boolean, collector: FieldCollector): void {
  if (stream.remoteEnded) return stream.reset(ErrorCode.STREAM_CLOSED);
  const lengthOk = stream.declaredLength < 0 || stream.declaredLength === stream.receivedLength;
  if (!(flags & Flag.END_STREAM) || !withinSize || collector.finish() !== undefined || !lengthOk) return stream.reset(ErrorCode.PROTOCOL_ERROR);
  stream.ontrailers?.(collector.fields);
  if (!stream.closed) stream.remoteEnd();
}

/** Decodes a complete field block; HPACK errors are connection errors (COMPRESSION_ERROR, §4.3). */
export function decodeBlock(decoder: HpackDecoder, block: Buffer, collector: FieldCollector): boolean {
  try {
    return decoder.decode(block, collector.add);
  } catch (err) {
    if (err instanceof HpackError) throw new H2ConnectionError(ErrorCode.COMPRESSION_ERROR, `HPACK: ${err.message}`);
    throw err;
  }
}
