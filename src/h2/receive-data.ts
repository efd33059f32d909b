/**
 * Receiving a DATA frame (RFC 9113 §6.1, §6.9): padding stripped, the whole payload counted
 * against the connection's and the stream's receive windows (more than either allows is a
 * FLOW_CONTROL_ERROR), the body handed to the stream, `content-length` checked (§8.1.1), and the
 * windows given back with WINDOW_UPDATE once half of each is consumed — the connection's at
 * once, the stream's when the application consumed it (at once unless it manages flow itself).
 * The window the peer may use is exactly what we advertised, minus what it sent (padding
 * included), plus what we gave back by WINDOW_UPDATEs already written: a window given back counts
 * from the moment its update is written (the connection applies the credits after each write),
 * so DATA in the read that gave it back, sent before the peer could see the update, may not use
 * it, and neither may DATA of a later read while the update still waits in our output.
 */
import { ErrorCode, Flag, H2ConnectionError, windowUpdateFrame } from './frames.js';
import type { H2Stream } from './stream.js';

/** The connection's side of DATA reception (connection.ts). */
export interface FlowAccount {
  recvWindow: number;
  recvUnacked: number;
  /** Returned by a WINDOW_UPDATE, added to `recvWindow` once it is written. */
  recvCredit: number;
  readonly connectionWindowTarget: number;
  queue(bytes: Buffer): void;
  chargeControl(): void;
  isIdle(sid: number): boolean;
  closedStreamFrame(sid: number): void;
}

/** Gives `n` bytes back to the connection's receive window (WINDOW_UPDATE when half is used). */
function returnToConnection(c: FlowAccount, n: number): void {
  c.recvUnacked += n;
  if (c.recvUnacked >= c.connectionWindowTarget / 2) {
    c.recvCredit += c.recvUnacked;
    c.queue(windowUpdateFrame(0, c.recvUnacked));
    c.recvUnacked = 0;
  }
}

export function receiveData(c: FlowAccount, streams: ReadonlyMap<number, H2Stream>, buf: Buffer, at: number, length: number, flags: number, sid: number): void {
  if (sid === 0) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on stream 0');
  if (c.isIdle(sid)) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA on an idle stream');
  if (length > c.recvWindow) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'DATA beyond the connection window');
  c.recvWindow -= length;
  let start = at;
  let end = at + length;
  if (flags & Flag.PADDED) {
    if (length < 1) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'DATA too short for its padding length');
    const pad = buf[start++]!;
    if (pad >= length) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'DATA padding longer than its payload');
    end -= pad;
  }
  const n = end - start;
  const endStream = (flags & Flag.END_STREAM) !== 0;
  if (n === 0 && !endStream) c.chargeControl();
  // Every byte counts for the connection, even on a stream that is gone (§6.9).
  returnToConnection(c, length);
  const stream = streams.get(sid);
  if (!stream) return c.closedStreamFrame(sid);
  if (stream.remoteEnded) return stream.reset(ErrorCode.STREAM_CLOSED);
  if (length > stream.recvWindow) return stream.reset(ErrorCode.FLOW_CONTROL_ERROR);
  stream.recvWindow -= length;
  stream.receivedLength += n;
  if (stream.declaredLength >= 0 && (stream.receivedLength > stream.declaredLength || (endStream && stream.receivedLength !== stream.declaredLength))) {
    return stream.reset(ErrorCode.PROTOCOL_ERROR);
  }
  if (n > 0) stream.ondata?.(buf.subarray(start, end));
  if (stream.closed) return;
  // Padding is consumed here; the body when the application says so (at once by default).
  const consumed = stream.manualFlow ? length - n : length;
  if (consumed > 0) stream.consume(consumed);
  if (endStream) stream.remoteEnd();
}

/** Adds the windows returned by the WINDOW_UPDATEs just written to what the peer may send; returns the emptied list. */
export function applyCredits(c: FlowAccount, credited: H2Stream[]): H2Stream[] {
  c.recvWindow += c.recvCredit;
  c.recvCredit = 0;
  if (credited.length === 0) return credited;
  for (const s of credited) {
    s.recvWindow += s.recvCredit;
    s.recvCredit = 0;
  }
  return [];
}
