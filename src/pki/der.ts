/**
 * A minimal, strict DER reader and writer — just what the fast leaf path and the hand-built
 * CSR need. Definite lengths only, single-byte tags only, every length bounds-checked against
 * its parent. Anything else is ERR_PKI_DER_INVALID.
 */
import { PkiError } from './errors.js';

export const TAG_BOOLEAN = 0x01;
export const TAG_INTEGER = 0x02;
export const TAG_BIT_STRING = 0x03;
export const TAG_OCTET_STRING = 0x04;
export const TAG_NULL = 0x05;
export const TAG_OID = 0x06;
export const TAG_UTC_TIME = 0x17;
export const TAG_GENERALIZED_TIME = 0x18;
export const TAG_SEQUENCE = 0x30;
export const TAG_SET = 0x31;

/** One element: `tag`, header at `start`, content in [contentStart, end). */
export interface Tlv {
  readonly tag: number;
  readonly start: number;
  readonly contentStart: number;
  readonly end: number;
}

function bad(what: string): PkiError {
  return new PkiError('ERR_PKI_DER_INVALID', `malformed DER: ${what}`);
}

/** Reads the element at `offset`; it must end at or before `limit`. */
export function readTlv(buf: Uint8Array, offset: number, limit: number = buf.length): Tlv {
  if (offset + 2 > limit) throw bad('truncated header');
  const tag = buf[offset]!;
  if ((tag & 0x1f) === 0x1f) throw bad('multi-byte tags are not supported');
  let len = buf[offset + 1]!;
  let p = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0) throw bad('indefinite length');
    if (n > 4) throw bad('length too large');
    if (p + n > limit) throw bad('truncated length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[p + i]!;
    if (len < 0x80 || (n > 1 && buf[p] === 0)) throw bad('non-minimal length');
    p += n;
  }
  const end = p + len;
  if (end > limit) throw bad('element runs past its container');
  return { tag, start: offset, contentStart: p, end };
}

/** Reads the element at `offset` and checks its tag. */
export function expectTlv(buf: Uint8Array, offset: number, limit: number, tag: number, what: string): Tlv {
  const t = readTlv(buf, offset, limit);
  if (t.tag !== tag) throw bad(`${what}: expected tag 0x${tag.toString(16)}, got 0x${t.tag.toString(16)}`);
  return t;
}

/** The DER length octets for `n`. */
export function encodeLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  if (n < 0x100) return Buffer.from([0x81, n]);
  if (n < 0x10000) return Buffer.from([0x82, n >> 8, n & 0xff]);
  if (n < 0x1000000) return Buffer.from([0x83, n >> 16, (n >> 8) & 0xff, n & 0xff]);
  throw new RangeError('DER element too large');
}

/** Tag + length + the concatenated parts. */
export function tlv(tag: number, ...parts: readonly Uint8Array[]): Buffer {
  let len = 0;
  for (const p of parts) len += p.length;
  return Buffer.concat([Buffer.from([tag]), encodeLength(len), ...parts]);
}

/** Content octets of a minimal positive INTEGER for unsigned big-endian `bytes`. */
export function positiveIntegerContent(bytes: Uint8Array): Buffer {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  const trimmed = Buffer.from(bytes.subarray(i));
  if (trimmed.length === 0) return Buffer.from([0]);
  return trimmed[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), trimmed]) : trimmed;
}

/** DER OID encoding of a dotted string ('1.2.840.10045.4.3.2'). */
export function encodeOid(dotted: string): Buffer {
  const arcs = dotted.split('.').map((s) => Number(s));
  if (arcs.length < 2 || arcs.some((a) => !Number.isInteger(a) || a < 0)) throw new RangeError(`bad OID ${dotted}`);
  const out: number[] = [arcs[0]! * 40 + arcs[1]!];
  for (const arc of arcs.slice(2)) {
    const chunk: number[] = [arc & 0x7f];
    let v = Math.floor(arc / 128);
    while (v > 0) {
      chunk.unshift((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    out.push(...chunk);
  }
  return tlv(TAG_OID, Buffer.from(out));
}

function two(n: number): string {
  return n < 10 ? `0${n}` : String(n);
}

/**
 * RFC 5280 Time: UTCTime (YYMMDDHHMMSSZ) for 1950..2049, GeneralizedTime (YYYYMMDDHHMMSSZ)
 * otherwise; whole seconds only.
 */
export function encodeTime(ms: number): Buffer {
  const d = new Date(ms);
  const y = d.getUTCFullYear();
  const rest = `${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}${two(d.getUTCSeconds())}Z`;
  if (y >= 1950 && y < 2050) return tlv(TAG_UTC_TIME, Buffer.from(`${two(y % 100)}${rest}`, 'latin1'));
  return tlv(TAG_GENERALIZED_TIME, Buffer.from(`${String(y).padStart(4, '0')}${rest}`, 'latin1'));
}

/** The instant of an RFC 5280 Time element (`encodeTime`'s inverse; whole seconds, `Z` only). */
export function decodeTime(buf: Uint8Array, t: Tlv): number {
  const text = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength).toString('latin1', t.contentStart, t.end);
  const m = t.tag === TAG_UTC_TIME ? /^(\d\d)(\d{10})Z$/.exec(text) : t.tag === TAG_GENERALIZED_TIME ? /^(\d{4})(\d{10})Z$/.exec(text) : null;
  if (!m) throw bad('not a UTCTime or GeneralizedTime ending in Z');
  let year = Number(m[1]);
  if (t.tag === TAG_UTC_TIME) year += year < 50 ? 2000 : 1900;
  const r = m[2]!;
  const ms = Date.UTC(year, Number(r.slice(0, 2)) - 1, Number(r.slice(2, 4)), Number(r.slice(4, 6)), Number(r.slice(6, 8)), Number(r.slice(8, 10)));
  if (!Number.isFinite(ms)) throw bad('time out of range');
  return ms;
}
