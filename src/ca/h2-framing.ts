/**
 * The one response message of CreateCertificate (`IstioCertificateResponse`) framed straight
 * into one buffer, as the CA's http2 transport sends it (the generic gRPC framing, `grpc-message`
 * and `grpc-timeout` are src/grpc/wire-format.ts).
 */

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
