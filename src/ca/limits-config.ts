/**
 * The CA's transport limits (limits.ts) from their env vars: seconds and counts, each
 * range-checked by the `ConfigReader` (every problem listed with the others).
 */
import type { ConfigReader } from '../core/config.js';
import { DEFAULT_CA_LIMITS, type CaLimits } from './limits.js';

export const LIMITS_ENV = Object.freeze({
  TLS_HANDSHAKE_TIMEOUT_SECONDS: 'CA_TLS_HANDSHAKE_TIMEOUT_SECONDS',
  IDLE_SESSION_TIMEOUT_SECONDS: 'CA_IDLE_SESSION_TIMEOUT_SECONDS',
  REQUEST_BODY_TIMEOUT_SECONDS: 'CA_REQUEST_BODY_TIMEOUT_SECONDS',
  MAX_CONCURRENT_STREAMS: 'CA_MAX_CONCURRENT_STREAMS',
  MAX_CONNECTIONS: 'CA_MAX_CONNECTIONS',
  MAX_STREAMS: 'CA_MAX_STREAMS',
  MAX_HEADER_LIST_BYTES: 'CA_MAX_HEADER_LIST_BYTES',
  SETTINGS_ACK_TIMEOUT_SECONDS: 'CA_SETTINGS_ACK_TIMEOUT_SECONDS',
});

/** The transport limits from their env vars (seconds and counts), each range-checked. */
export function readLimits(r: ConfigReader): CaLimits {
  const d = DEFAULT_CA_LIMITS;
  const E = LIMITS_ENV;
  const seconds = (name: string, fallbackMs: number, max: number) => r.int(name, fallbackMs / 1000, { min: 1, max }) * 1000;
  return Object.freeze({
    tlsHandshakeTimeoutMs: seconds(E.TLS_HANDSHAKE_TIMEOUT_SECONDS, d.tlsHandshakeTimeoutMs, 120),
    idleSessionTimeoutMs: seconds(E.IDLE_SESSION_TIMEOUT_SECONDS, d.idleSessionTimeoutMs, 86_400),
    requestBodyTimeoutMs: seconds(E.REQUEST_BODY_TIMEOUT_SECONDS, d.requestBodyTimeoutMs, 300),
    maxConcurrentStreams: r.int(E.MAX_CONCURRENT_STREAMS, d.maxConcurrentStreams, { min: 1, max: 10_000 }),
    maxConnections: r.int(E.MAX_CONNECTIONS, d.maxConnections, { min: 1, max: 1_000_000 }),
    maxStreams: r.int(E.MAX_STREAMS, d.maxStreams, { min: 1, max: 1_000_000 }),
    // Below 4 KiB a real token plus gRPC's own headers may not fit; above 64 KiB node's HPACK
    // encoder (grpc-js clients) cannot send one field anyway and nghttp2 caps CONTINUATION frames.
    maxHeaderListBytes: r.int(E.MAX_HEADER_LIST_BYTES, d.maxHeaderListBytes, { min: 4096, max: 65_536 }),
    // Generous: a client on a slow or lossy link still acknowledges within seconds.
    settingsAckTimeoutMs: seconds(E.SETTINGS_ACK_TIMEOUT_SECONDS, d.settingsAckTimeoutMs, 300),
  });
}
