/**
 * The stream-level control frames a client sends (RFC 9113): WINDOW_UPDATE (§6.9: the
 * connection's or a stream's send window grows, and what waited for it is written again),
 * PRIORITY (§6.3, §5.3.2: advisory and not used, only checked) and RST_STREAM (§6.4: the stream
 * ends; resetting streams before their answer is charged to the reset budget, the rapid-reset
 * attack's shape). Each frame is charged to the cheap-frame budget where the connection charged
 * it before; errors are connection errors (`H2ConnectionError`, thrown) or stream errors
 * (RST_STREAM), as §5.4 has them.
 */
import { ErrorCode, H2ConnectionError, MAX_WINDOW } from './frames.js';
import type { H2Stream } from './stream.js';

/** The connection's side of the stream-level control frames (connection.ts). */
export interface StreamControl {
  /** The connection's send window (shared by every stream). */
  connectionWindow: number;
  chargeControl(): void;
  isIdle(sid: number): boolean;
  /** Sends RST_STREAM for a stream id without an `H2Stream`, remembered as reset (§5.4.2). */
  rst(sid: number, code: number): void;
  /** Counts a stream reset before its answer; false past the reset budget. */
  chargeReset(): boolean;
}

export function receiveWindowUpdate(c: StreamControl, streams: ReadonlyMap<number, H2Stream>, blocked: Set<H2Stream>, buf: Buffer, at: number, length: number, sid: number): void {
  if (length !== 4) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'WINDOW_UPDATE length other than 4');
  c.chargeControl();
  const increment = buf.readUInt32BE(at) & MAX_WINDOW;
  if (sid === 0) {
    if (increment === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'connection WINDOW_UPDATE of 0');
    c.connectionWindow += increment;
    if (c.connectionWindow > MAX_WINDOW) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'connection window above 2^31-1');
    return resume(c, blocked, [...blocked]);
  }
  if (c.isIdle(sid)) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'WINDOW_UPDATE on an idle stream');
  const stream = streams.get(sid);
  if (!stream) return;
  if (increment === 0) return stream.reset(ErrorCode.PROTOCOL_ERROR);
  stream.sendWindow += increment;
  if (stream.sendWindow > MAX_WINDOW) return stream.reset(ErrorCode.FLOW_CONTROL_ERROR);
  blocked.delete(stream);
  stream.flush();
}

/** Writes `streams` again, in order, while the connection's send window is open (a copy: a flush may block a stream again). */
export function resume(c: StreamControl, blocked: Set<H2Stream>, streams: readonly H2Stream[]): void {
  for (const s of streams) {
    if (c.connectionWindow <= 0) return;
    blocked.delete(s);
    if (!s.closed) s.flush();
  }
}

export function receivePriority(c: StreamControl, streams: ReadonlyMap<number, H2Stream>, buf: Buffer, at: number, length: number, sid: number): void {
  if (sid === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'PRIORITY on stream 0');
  c.chargeControl();
  if (length !== 5) return c.rst(sid, ErrorCode.FRAME_SIZE_ERROR);
  // Priorities are advisory and not used (RFC 9113 §5.3.2); a self-dependency is still an error.
  if ((buf.readUInt32BE(at) & MAX_WINDOW) === sid) {
    const s = streams.get(sid);
    if (s) s.reset(ErrorCode.PROTOCOL_ERROR);
    else c.rst(sid, ErrorCode.PROTOCOL_ERROR);
  }
}

export function receiveRstStream(c: StreamControl, streams: ReadonlyMap<number, H2Stream>, buf: Buffer, at: number, length: number, sid: number): void {
  if (sid === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
  if (length !== 4) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'RST_STREAM length other than 4');
  if (c.isIdle(sid)) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'RST_STREAM on an idle stream');
  const stream = streams.get(sid);
  if (!stream) return c.chargeControl();
  // Opening streams and resetting them before their answer is the rapid-reset attack's shape.
  if (!stream.headersSent && !c.chargeReset()) throw new H2ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, 'too many streams reset');
  stream.abort(buf.readUInt32BE(at));
}
