/**
 * Cutting a socket's byte stream into HTTP/2 frames in place (RFC 9113 §3.4, §4.1): the client
 * preface is checked first, then each complete frame is handed over as (buffer, payload
 * offset, length, type, flags, stream id) — no copy, no frame object. A frame split across
 * chunks waits for its remaining bytes (at most one frame, bounded by SETTINGS_MAX_FRAME_SIZE:
 * a larger length is a FRAME_SIZE_ERROR before its bytes are buffered).
 */
import { CLIENT_PREFACE, DEFAULT_MAX_FRAME_SIZE, ErrorCode, FRAME_HEADER_BYTES, H2ConnectionError, MAX_WINDOW } from './frames.js';

export type OnFrame = (buf: Buffer, at: number, length: number, type: number, flags: number, streamId: number) => void;

export class FrameReader {
  readonly #onFrame: OnFrame;
  /** Stop between frames (the connection is gone). */
  readonly #stopped: () => boolean;
  #prefaceAt = 0;
  #leftover: Buffer | undefined;

  constructor(onFrame: OnFrame, stopped: () => boolean) {
    this.#onFrame = onFrame;
    this.#stopped = stopped;
  }

  /** Reads a chunk; throws `H2ConnectionError` for a bad preface or an oversized frame (and what `onFrame` throws). */
  read(chunk: Buffer): void {
    let buf = chunk;
    if (this.#leftover) {
      buf = Buffer.concat([this.#leftover, chunk]);
      this.#leftover = undefined;
    }
    let at = 0;
    if (this.#prefaceAt < CLIENT_PREFACE.length) {
      at = this.#preface(buf);
      if (this.#prefaceAt < CLIENT_PREFACE.length) return;
    }
    while (buf.length - at >= FRAME_HEADER_BYTES) {
      const length = (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!;
      if (length > DEFAULT_MAX_FRAME_SIZE) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'frame larger than SETTINGS_MAX_FRAME_SIZE');
      if (buf.length - at - FRAME_HEADER_BYTES < length) break;
      this.#onFrame(buf, at + FRAME_HEADER_BYTES, length, buf[at + 3]!, buf[at + 4]!, buf.readUInt32BE(at + 5) & MAX_WINDOW);
      if (this.#stopped()) return;
      at += FRAME_HEADER_BYTES + length;
    }
    if (at < buf.length) this.#leftover = buf.subarray(at);
  }

  /** Checks the preface bytes in `buf`; returns how many it took. */
  #preface(buf: Buffer): number {
    const n = Math.min(CLIENT_PREFACE.length - this.#prefaceAt, buf.length);
    if (buf.compare(CLIENT_PREFACE, this.#prefaceAt, this.#prefaceAt + n, 0, n) !== 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'bad connection preface');
    this.#prefaceAt += n;
    return n;
  }
}
