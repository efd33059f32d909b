/**
 * HTTP/2 framing facts and frame writers (RFC 9113 §4, §6, §7, §11): the frame types, flags,
 * error codes and setting identifiers as numbers, the client connection preface, and the small
 * frames the server engine writes (each one Buffer, header and payload together). Written once
 * here so the connection (connection.ts), the send side (send-queue.ts) and tests share them.
 */

/** RFC 9113 §3.4: the client connection preface, before its SETTINGS frame. */
export const CLIENT_PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** RFC 9113 §4.1: every frame starts with a 9-byte header. */
export const FRAME_HEADER_BYTES = 9;

/** RFC 9113 §6 frame types (§11.2 registry). */
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

/** RFC 9113 §6 flags (meaning depends on the frame type). */
export const Flag = {
  END_STREAM: 0x1,
  ACK: 0x1,
  END_HEADERS: 0x4,
  PADDED: 0x8,
  PRIORITY: 0x20,
} as const;

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
export const SettingId = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
} as const;

/** RFC 9113 §6.5.2 / §6.9: protocol defaults and bounds. */
export const DEFAULT_WINDOW = 65_535;
export const MAX_WINDOW = 0x7fff_ffff;
export const DEFAULT_MAX_FRAME_SIZE = 16_384;
export const MAX_MAX_FRAME_SIZE = 16_777_215;
export const DEFAULT_HEADER_TABLE_SIZE = 4096;

/** Writes a frame header at `at` in `out`. */
export function writeFrameHeader(out: Buffer, at: number, length: number, type: number, flags: number, streamId: number): void {
  out[at] = length >>> 16;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(streamId & MAX_WINDOW, at + 5);
}

/** One frame with `payload` (copied after the header). */
export function frameOf(type: number, flags: number, streamId: number, payload?: Uint8Array): Buffer {
  const n = payload?.length ?? 0;
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + n);
  writeFrameHeader(out, 0, n, type, flags, streamId);
  if (payload) out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** A SETTINGS frame with the given (identifier, value) pairs. */
export function settingsFrame(settings: ReadonlyArray<readonly [number, number]>): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 6 * settings.length);
  writeFrameHeader(out, 0, 6 * settings.length, FrameType.SETTINGS, 0, 0);
  let at = FRAME_HEADER_BYTES;
  for (const [id, value] of settings) {
    out.writeUInt16BE(id, at);
    out.writeUInt32BE(value, at + 2);
    at += 6;
  }
  return out;
}

/** The SETTINGS acknowledgement (empty, ACK flag). */
export const SETTINGS_ACK = frameOf(FrameType.SETTINGS, Flag.ACK, 0);

export function rstStreamFrame(streamId: number, code: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
  writeFrameHeader(out, 0, 4, FrameType.RST_STREAM, 0, streamId);
  out.writeUInt32BE(code, FRAME_HEADER_BYTES);
  return out;
}

export function windowUpdateFrame(streamId: number, increment: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 4);
  writeFrameHeader(out, 0, 4, FrameType.WINDOW_UPDATE, 0, streamId);
  out.writeUInt32BE(increment, FRAME_HEADER_BYTES);
  return out;
}

/** GOAWAY with the last stream id processed, the code and a short debug text (ASCII, no secrets). */
export function goawayFrame(lastStreamId: number, code: number, debug = ''): Buffer {
  const text = Buffer.from(debug.slice(0, 128), 'latin1');
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 8 + text.length);
  writeFrameHeader(out, 0, 8 + text.length, FrameType.GOAWAY, 0, 0);
  out.writeUInt32BE(lastStreamId & MAX_WINDOW, FRAME_HEADER_BYTES);
  out.writeUInt32BE(code, FRAME_HEADER_BYTES + 4);
  text.copy(out, FRAME_HEADER_BYTES + 8);
  return out;
}

/** The PING acknowledgement echoing the 8 opaque bytes at `at` of `src`. */
export function pingAckFrame(src: Buffer, at: number): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + 8);
  writeFrameHeader(out, 0, 8, FrameType.PING, Flag.ACK, 0);
  src.copy(out, FRAME_HEADER_BYTES, at, at + 8);
  return out;
}

/**
 * A connection error (RFC 9113 §5.4.1): the connection answers GOAWAY with `code` and closes.
 * Thrown inside frame processing and caught at the connection's read loop; the message is for
 * the debug data and the log (never request content).
 */
export class H2ConnectionError extends Error {
  readonly h2code: number;
  /** `ERR_HTTP2_PEER_<code>` for what a peer caused, `ERR_H2_INTERNAL` for ours (logs tell them apart). */
  readonly code: string;
  constructor(h2code: number, message: string) {
    super(message);
    this.name = 'H2ConnectionError';
    this.h2code = h2code;
    this.code = h2code === ErrorCode.INTERNAL_ERROR ? 'ERR_H2_INTERNAL' : `ERR_HTTP2_PEER_${h2code}`;
  }
}
