/**
 * Assembling a field block from HEADERS and CONTINUATION frames (RFC 9113 §4.3, §6.2, §6.10),
 * bounded: the fragments of one block may not pass `maxBlockBytes` nor `maxFrames` frames (a
 * CONTINUATION flood), and no other frame may come between them. The payload rules of HEADERS
 * (padding, the priority fields) are read here too. Errors are connection errors
 * (`H2ConnectionError`): a block that cannot be decoded leaves HPACK out of sync. A second block
 * on an open stream is its trailers (`receiveTrailers`).
 */
import { ErrorCode, Flag, H2ConnectionError } from './frames.js';
import { HpackError, type HpackDecoder } from './hpack.js';
import type { FieldCollector } from './request-headers.js';
import type { H2Stream } from './stream.js';

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
