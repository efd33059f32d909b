/**
 * What an unauthenticated client may hold or cost at the CA's gRPC port. Nothing here needs a
 * token: a TCP connection, a TLS handshake, an HTTP/2 session and a stream's headers all arrive
 * before any authentication, so each is bounded in count and in time.
 *
 * Worst-case memory held by clients that never authenticate is about
 *   maxConnections x (TLS + HTTP/2 session, ~50 KB measured) + maxStreams x (stream ~5.5 KB + headers up to maxHeaderListBytes)
 * which at the defaults is ~200 MB + ~90 MB, within the deploy/ limit of 1 GiB; see docs/security.md.
 */

export interface CaLimits {
  /** A TLS handshake not finished this long after the TCP connection arrived is dropped. */
  readonly tlsHandshakeTimeoutMs: number;
  /** An HTTP/2 session with no open stream for this long is closed (GOAWAY), as gRPC's MAX_CONNECTION_IDLE. */
  readonly idleSessionTimeoutMs: number;
  /**
   * A unary call (CreateCertificate, health Check) whose request message has not arrived
   * complete this long after its headers gets DEADLINE_EXCEEDED and its stream is closed.
   */
  readonly requestBodyTimeoutMs: number;
  /** SETTINGS_MAX_CONCURRENT_STREAMS: streams one connection may have open. */
  readonly maxConcurrentStreams: number;
  /** TCP connections open at once (handshaking ones included); beyond it new ones are closed at once. */
  readonly maxConnections: number;
  /** Streams open at once across all connections; beyond it a new stream gets RESOURCE_EXHAUSTED at once. */
  readonly maxStreams: number;
  /**
   * SETTINGS_MAX_HEADER_LIST_SIZE (HPACK size: name + value + 32 per field). A request over it is
   * reset with ENHANCE_YOUR_CALM, which gRPC clients report as RESOURCE_EXHAUSTED (not retried),
   * and never reaches the handler.
   */
  readonly maxHeaderListBytes: number;
  /**
   * RFC 9113 §6.5.3 on the `h2` transport (certbroker's engine; node:http2 has no such bound): a
   * connection that has not acknowledged our SETTINGS this long after the TLS handshake gets
   * GOAWAY(SETTINGS_TIMEOUT) and is closed.
   */
  readonly settingsAckTimeoutMs: number;
}

export const DEFAULT_CA_LIMITS: CaLimits = Object.freeze({
  tlsHandshakeTimeoutMs: 10_000,
  idleSessionTimeoutMs: 300_000,
  requestBodyTimeoutMs: 10_000,
  maxConcurrentStreams: 100,
  maxConnections: 4096,
  maxStreams: 4096,
  maxHeaderListBytes: 16 * 1024,
  settingsAckTimeoutMs: 10_000,
});

/** The limits with every unset field at its default (frozen). */
export function resolveLimits(partial: Partial<CaLimits> | undefined): CaLimits {
  return Object.freeze({ ...DEFAULT_CA_LIMITS, ...(partial ?? {}) });
}
