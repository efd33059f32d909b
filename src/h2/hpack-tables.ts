/**
 * The two constant tables of HPACK (RFC 7541): the static table (Appendix A) and the Huffman code
 * (Appendix B). The Huffman code is canonical: codes of one length are consecutive in symbol order
 * and each length starts where the previous one ended, shifted. So the 257 code lengths are all
 * that is typed in here; `HUFFMAN_CODES` is derived from them (and checked against known codes by
 * test/h2/hpack-tables.test.ts, and against nghttp2's encoder by test/h2/hpack-peer.test.ts).
 */

/** RFC 7541 Appendix A: the 61 static entries, index 1 first (a value of '' is a name-only entry). */
export const STATIC_TABLE: ReadonlyArray<readonly [name: string, value: string]> = [
  [':authority', ''],
  [':method', 'GET'],
  [':method', 'POST'],
  [':path', '/'],
  [':path', '/index.html'],
  [':scheme', 'http'],
  [':scheme', 'https'],
  [':status', '200'],
  [':status', '204'],
  [':status', '206'],
  [':status', '304'],
  [':status', '400'],
  [':status', '404'],
  [':status', '500'],
  ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'],
  ['accept-language', ''],
  ['accept-ranges', ''],
  ['accept', ''],
  ['access-control-allow-origin', ''],
  ['age', ''],
  ['allow', ''],
  ['authorization', ''],
  ['cache-control', ''],
  ['content-disposition', ''],
  ['content-encoding', ''],
  ['content-language', ''],
  ['content-length', ''],
  ['content-location', ''],
  ['content-range', ''],
  ['content-type', ''],
  ['cookie', ''],
  ['date', ''],
  ['etag', ''],
  ['expect', ''],
  ['expires', ''],
  ['from', ''],
  ['host', ''],
  ['if-match', ''],
  ['if-modified-since', ''],
  ['if-none-match', ''],
  ['if-range', ''],
  ['if-unmodified-since', ''],
  ['last-modified', ''],
  ['link', ''],
  ['location', ''],
  ['max-forwards', ''],
  ['proxy-authenticate', ''],
  ['proxy-authorization', ''],
  ['range', ''],
  ['referer', ''],
  ['refresh', ''],
  ['retry-after', ''],
  ['server', ''],
  ['set-cookie', ''],
  ['strict-transport-security', ''],
  ['transfer-encoding', ''],
  ['user-agent', ''],
  ['vary', ''],
  ['via', ''],
  ['www-authenticate', ''],
];

/** The symbol that ends a Huffman string only as padding: decoding it is an error (RFC 7541 5.2). */
export const HUFFMAN_EOS = 256;

/** RFC 7541 Appendix B: the code length in bits of symbols 0..255 and EOS (256), 16 to a row. */
export const HUFFMAN_CODE_LENGTHS: readonly number[] = [
  /* 0x00 */ 13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
  /* 0x10 */ 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  /* 0x20 */ 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
  /* 0x30 */ 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  /* 0x40 */ 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
  /* 0x50 */ 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  /* 0x60 */ 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
  /* 0x70 */ 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  /* 0x80 */ 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
  /* 0x90 */ 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  /* 0xa0 */ 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
  /* 0xb0 */ 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  /* 0xc0 */ 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
  /* 0xd0 */ 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  /* 0xe0 */ 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
  /* 0xf0 */ 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  /* EOS */ 30,
];

/** The code of each symbol (right-aligned in `HUFFMAN_CODE_LENGTHS[s]` bits), derived canonically. */
export const HUFFMAN_CODES: readonly number[] = canonicalCodes(HUFFMAN_CODE_LENGTHS);

function canonicalCodes(lengths: readonly number[]): number[] {
  const order = lengths.map((_, s) => s).sort((a, b) => lengths[a]! - lengths[b]! || a - b);
  const codes = new Array<number>(lengths.length).fill(0);
  let code = 0;
  let len = lengths[order[0]!]!;
  for (const s of order) {
    const l = lengths[s]!;
    // Codes stay below 2^30, so plain number arithmetic is exact (no 32-bit sign trouble).
    code *= 2 ** (l - len);
    len = l;
    codes[s] = code;
    code += 1;
  }
  return codes;
}
