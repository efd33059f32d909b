/**
 * The server engine's SETTINGS, both ways (RFC 9113 §6.5): what we advertise (`H2Settings`, as
 * the first frames of the connection: SETTINGS and a connection WINDOW_UPDATE) and reading the
 * peer's, with the §6.5.2 bounds checked (ENABLE_PUSH 0/1, INITIAL_WINDOW_SIZE at most 2^31-1,
 * MAX_FRAME_SIZE within 2^14..2^24-1; unknown identifiers ignored); and the engine's bounds in
 * time around them (`H2Timeouts`: the SETTINGS acknowledgement, §6.5.3, and the graceful close's
 * PING, §6.8), which are not advertised.
 */
import { DEFAULT_HEADER_TABLE_SIZE, DEFAULT_WINDOW, ErrorCode, H2ConnectionError, MAX_MAX_FRAME_SIZE, MAX_WINDOW, DEFAULT_MAX_FRAME_SIZE, SettingId, settingsFrame, windowUpdateFrame } from './frames.js';

/** What the server advertises and enforces. */
export interface H2Settings {
  /** SETTINGS_MAX_CONCURRENT_STREAMS: more open streams are refused (REFUSED_STREAM). */
  readonly maxConcurrentStreams: number;
  /** SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 size: name + value + 32 per field); a larger request is reset. */
  readonly maxHeaderListSize: number;
  /** SETTINGS_INITIAL_WINDOW_SIZE: the receive window of each stream. */
  readonly initialWindowSize: number;
  /** The connection's receive window (raised from 65,535 by a WINDOW_UPDATE at the start). */
  readonly connectionWindowSize: number;
}

export const DEFAULT_H2_SETTINGS: H2Settings = Object.freeze({
  maxConcurrentStreams: 100,
  maxHeaderListSize: 16 * 1024,
  initialWindowSize: DEFAULT_WINDOW,
  connectionWindowSize: 1024 * 1024,
});

/** How long the engine waits for the peer (timers per connection, cleared when it closes). */
export interface H2Timeouts {
  /** §6.5.3: our SETTINGS not acknowledged this long after it was sent: connection error SETTINGS_TIMEOUT. */
  readonly settingsAckMs: number;
  /**
   * §6.8 graceful close: after the first GOAWAY (last stream id 2^31-1) and its PING, the final
   * GOAWAY (the real last stream id) goes out on the PING's ACK, or after this long without one.
   */
  readonly drainPingMs: number;
}

export const DEFAULT_H2_TIMEOUTS: H2Timeouts = Object.freeze({
  settingsAckMs: 10_000,
  drainPingMs: 1_000,
});

/** The server's first bytes: its SETTINGS and, when larger than the default, the connection window. */
export function serverPreface(s: H2Settings): Buffer {
  const pairs: Array<readonly [number, number]> = [
    [SettingId.MAX_CONCURRENT_STREAMS, s.maxConcurrentStreams],
    [SettingId.MAX_HEADER_LIST_SIZE, s.maxHeaderListSize],
  ];
  if (s.initialWindowSize !== DEFAULT_WINDOW) pairs.push([SettingId.INITIAL_WINDOW_SIZE, s.initialWindowSize]);
  const settings = settingsFrame(pairs);
  if (s.connectionWindowSize <= DEFAULT_WINDOW) return settings;
  return Buffer.concat([settings, windowUpdateFrame(0, s.connectionWindowSize - DEFAULT_WINDOW)]);
}

/** The peer's settings that matter to a server. */
export interface PeerSettings {
  initialWindowSize: number;
  maxFrameSize: number;
  /** SETTINGS_HEADER_TABLE_SIZE: a change makes our encoder send a table size update (it uses no table). */
  headerTableSize: number;
  /** Advisory (RFC 9113 §6.5.2): we do not send larger response heads anyway. */
  maxHeaderListSize: number;
}

export function defaultPeerSettings(): PeerSettings {
  return { initialWindowSize: DEFAULT_WINDOW, maxFrameSize: DEFAULT_MAX_FRAME_SIZE, headerTableSize: DEFAULT_HEADER_TABLE_SIZE, maxHeaderListSize: Number.MAX_SAFE_INTEGER };
}

/**
 * Applies a SETTINGS payload (`length` bytes at `at`, not an ACK) to `peer`; returns the change
 * of INITIAL_WINDOW_SIZE (to apply to every open stream's send window, §6.9.2).
 */
export function applyPeerSettings(peer: PeerSettings, buf: Buffer, at: number, length: number): number {
  if (length % 6 !== 0) throw new H2ConnectionError(ErrorCode.FRAME_SIZE_ERROR, 'SETTINGS length not a multiple of 6');
  let windowDelta = 0;
  for (let p = at; p < at + length; p += 6) {
    const id = buf.readUInt16BE(p);
    const value = buf.readUInt32BE(p + 2);
    switch (id) {
      case SettingId.ENABLE_PUSH:
        if (value > 1) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH other than 0 or 1');
        break;
      case SettingId.INITIAL_WINDOW_SIZE:
        if (value > MAX_WINDOW) throw new H2ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1');
        windowDelta += value - peer.initialWindowSize;
        peer.initialWindowSize = value;
        break;
      case SettingId.MAX_FRAME_SIZE:
        if (value < DEFAULT_MAX_FRAME_SIZE || value > MAX_MAX_FRAME_SIZE) throw new H2ConnectionError(ErrorCode.PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range');
        peer.maxFrameSize = value;
        break;
      case SettingId.HEADER_TABLE_SIZE:
        peer.headerTableSize = value;
        break;
      case SettingId.MAX_HEADER_LIST_SIZE:
        peer.maxHeaderListSize = value;
        break;
      default:
        // MAX_CONCURRENT_STREAMS: we push
        // nothing; unknown identifiers are ignored (§6.5.2).
        break;
    }
  }
  return windowDelta;
}
