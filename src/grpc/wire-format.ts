/**
 * The gRPC wire format (PROTOCOL-HTTP2.md) as certbroker's node:http2 server and client write
 * and read it by hand: the 5-byte length prefix, `grpc-message` percent-encoding, `grpc-timeout`.
 * Shared by the CA's http2 transport (src/ca/h2-*.ts) and the lean unary client
 * (h2-unary-channel.ts).
 */

/** One length-prefixed, uncompressed gRPC message. */
export function frame(body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out[0] = 0;
  out.writeUInt32BE(body.length, 1);
  out.set(body, 5);
  return out;
}

/** `grpc-message` as the gRPC spec asks: percent-encoded, printable ASCII except '%' kept. */
export function grpcMessage(details: string): string {
  return details.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => encodeURIComponent(c));
}

/** A received `grpc-message`, percent-decoded (a malformed escape is kept as sent, as the spec allows). */
export function parseGrpcMessage(value: string | string[] | undefined): string {
  if (typeof value !== 'string' || value === '') return '';
  if (!value.includes('%')) return value;
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The call's deadline from `grpc-timeout` (1–8 digits and a unit: H, M, S, m, u, n), in ms from
 * now; undefined when absent, malformed, or beyond what a timer can hold (then the client's own
 * deadline is the only one, as it always is in practice).
 */
export function grpcTimeoutMs(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^(\d{1,8})([HMSmun])$/u.exec(value);
  if (!m) return undefined;
  const ms = Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!;
  return ms <= MAX_TIMER_MS ? ms : undefined;
}

/** The `grpc-timeout` header for a deadline `ms` from now (whole milliseconds, at most 8 digits). */
export function grpcTimeoutHeader(ms: number): string {
  const whole = Math.max(0, Math.ceil(ms));
  return whole < 1e8 ? `${whole}m` : `${Math.min(99_999_999, Math.ceil(whole / 1000))}S`;
}
