/**
 * The gRPC wire format as the CA's http2 transport writes and reads it by hand: the 5-byte
 * length prefix, `grpc-message` percent-encoding, `grpc-timeout`, and the one response message
 * of CreateCertificate (`IstioCertificateResponse`) framed straight into one buffer.
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

/** Bytes of `n` as a protobuf varint. */
function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/**
 * IstioCertificateResponse (field 1, `repeated string cert_chain`) written straight into one
 * length-prefixed gRPC frame: one allocation, no intermediate message object. Tested against
 * protobufjs decoding of the same .proto.
 */
export function certChainFrame(chain: readonly string[]): Buffer {
  let size = 0;
  const lengths = new Array<number>(chain.length);
  for (let i = 0; i < chain.length; i++) {
    const n = Buffer.byteLength(chain[i]!, 'utf8');
    lengths[i] = n;
    size += 1 + varintSize(n) + n;
  }
  const out = Buffer.allocUnsafe(5 + size);
  out[0] = 0;
  out.writeUInt32BE(size, 1);
  let at = 5;
  for (let i = 0; i < chain.length; i++) {
    out[at++] = 0x0a; // field 1, length-delimited
    let n = lengths[i]!;
    while (n >= 0x80) {
      out[at++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 128);
    }
    out[at++] = n;
    at += out.write(chain[i]!, at, 'utf8');
  }
  return out;
}
