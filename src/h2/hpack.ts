/**
 * HPACK (RFC 7541) for certbroker's own HTTP/2 server engine: the decoder of request header
 * blocks and the encoder of response header blocks.
 *
 * `HpackDecoder` decodes one complete header block (HEADERS plus CONTINUATION fragments, joined by
 * the caller) and keeps the connection's dynamic table. Any malformed input throws `HpackError`
 * (the connection then fails with COMPRESSION_ERROR); work is linear in the block's length. A
 * header list over `maxHeaderListSize` (RFC 9113 6.5.2: name + value + 32 per field) is still
 * decoded to the end, so the table stays in sync, but its fields stop being delivered and
 * `decode` returns false (the caller refuses the stream). Long Huffman strings that repeat on a
 * connection without being indexed (nghttp2 never indexes `:path`; node marks `authorization`
 * never-indexed) are decoded once: each decoder remembers its last 4 such strings by their octets
 * (bench:h2-hpack: a grpc-js CA call's later blocks cost ~4x a latin1 copy of the block, the first ~45x).
 *
 * `HpackEncoder` never inserts into the peer's dynamic table: a field equal to a static entry is
 * indexed, otherwise it is a literal without indexing, naming a static entry's name where one
 * matches, with Huffman coding where that is shorter. So the peer's SETTINGS_HEADER_TABLE_SIZE
 * never constrains it, and a constant block can be encoded once (`encodeHeaderBlock`) and reused.
 */
import { CertbrokerError } from '../core/errors.js';
import { DynamicTable } from './hpack-dynamic-table.js';
import { huffmanDecode, huffmanEncodeInto, huffmanLength } from './hpack-huffman.js';
import { STATIC_TABLE } from './hpack-tables.js';

export type HpackErrorCode = 'ERR_H2_HPACK';

/** Malformed HPACK input (or a field the encoder cannot write): a connection error, COMPRESSION_ERROR. */
export class HpackError extends CertbrokerError<HpackErrorCode> {
  constructor(message: string) {
    super('ERR_H2_HPACK', message, { status: 'invalid-argument', publicMessage: message });
  }
}

/** One header field, name then value (latin1: one character per octet). */
export type HeaderField = readonly [name: string, value: string];

export interface HpackDecoderOptions {
  /** The SETTINGS_HEADER_TABLE_SIZE this endpoint advertises (4096 by default). */
  readonly maxTableSize: number;
  /** The header list size (RFC 9113 6.5.2) beyond which fields are no longer delivered. */
  readonly maxHeaderListSize: number;
}

const STATIC_COUNT = STATIC_TABLE.length;
const STATIC_NAMES = STATIC_TABLE.map(([n]) => n);
const STATIC_VALUES = STATIC_TABLE.map(([, v]) => v);
const INT_LIMIT = 0x7fffffff;
/** Huffman strings this long or longer are remembered, the last RECENT_STRINGS of them per decoder. */
const RECENT_MIN_OCTETS = 16;
const RECENT_STRINGS = 4;

/** What `src` holds between blocks, so a decoder keeps no block alive. */
const NO_BLOCK = Buffer.alloc(0);

function asBuffer(block: Uint8Array): Buffer {
  return Buffer.isBuffer(block) ? block : Buffer.from(block.buffer, block.byteOffset, block.byteLength);
}

export class HpackDecoder {
  private readonly table: DynamicTable;
  private readonly maxTableSize: number;
  private readonly maxHeaderListSize: number;
  /** The last few long Huffman strings decoded, their octets and text (RECENT_STRINGS at most). */
  private readonly recent: Array<{ readonly octets: Buffer; readonly text: string }> = [];
  private recentNext = 0;
  private src: Buffer = NO_BLOCK;
  private pos = 0;
  private end = 0;

  constructor(o: HpackDecoderOptions) {
    for (const [k, v] of [['maxTableSize', o.maxTableSize], ['maxHeaderListSize', o.maxHeaderListSize]] as const) {
      if (!Number.isSafeInteger(v) || v < 0) throw new HpackError(`${k} must be a non-negative integer, got ${v}`);
    }
    this.maxTableSize = Math.min(o.maxTableSize, INT_LIMIT);
    this.maxHeaderListSize = o.maxHeaderListSize;
    this.table = new DynamicTable(this.maxTableSize);
  }

  /**
   * Decodes one complete header block, calling `onField` for each field in order. Returns false
   * when the header list exceeded `maxHeaderListSize` (fields past the limit were not delivered).
   * Throws `HpackError` on malformed input; the dynamic table is then unusable (the connection ends).
   */
  decode(block: Uint8Array, onField: (name: string, value: string) => void): boolean {
    this.src = asBuffer(block);
    this.pos = 0;
    this.end = block.length;
    let listSize = 0;
    let fitting = true;
    let fieldsSeen = false;
    while (this.pos < this.end) {
      const b = this.src[this.pos]!;
      let name: string;
      let value: string;
      if (b >= 0x80) {
        const index = this.readInt(7);
        if (index === 0) throw new HpackError('indexed header field with index 0');
        name = this.nameAt(index);
        value = this.valueAt(index);
      } else if (b >= 0x40) {
        name = this.readName(6);
        value = this.readString();
        this.table.add(name, value);
      } else if (b >= 0x20) {
        if (fieldsSeen) throw new HpackError('dynamic table size update after the first header field of a block');
        const size = this.readInt(5);
        if (size > this.maxTableSize) throw new HpackError(`dynamic table size update to ${size}, above the advertised ${this.maxTableSize}`);
        this.table.resize(size);
        continue;
      } else {
        // Literal without indexing (0000) or never indexed (0001): the same for a decoder.
        name = this.readName(4);
        value = this.readString();
      }
      fieldsSeen = true;
      if (!fitting) continue;
      listSize += name.length + value.length + 32;
      if (listSize > this.maxHeaderListSize) fitting = false;
      else onField(name, value);
    }
    this.src = NO_BLOCK;
    return fitting;
  }

  private nameAt(index: number): string {
    if (index <= STATIC_COUNT) return STATIC_NAMES[index - 1]!;
    const i = index - STATIC_COUNT - 1;
    if (i >= this.table.length) throw new HpackError(`header index ${index} beyond the ${STATIC_COUNT + this.table.length} entries`);
    return this.table.name(i);
  }

  private valueAt(index: number): string {
    return index <= STATIC_COUNT ? STATIC_VALUES[index - 1]! : this.table.value(index - STATIC_COUNT - 1);
  }

  /** A literal's name: indexed (a non-zero prefix) or a string after the representation byte. */
  private readName(prefixBits: number): string {
    const index = this.readInt(prefixBits);
    return index === 0 ? this.readString() : this.nameAt(index);
  }

  /** RFC 7541 5.1: an integer with an N-bit prefix starting at `pos`, kept within 2^31 - 1. */
  private readInt(prefixBits: number): number {
    const src = this.src;
    const max = (1 << prefixBits) - 1;
    let v = src[this.pos++]! & max;
    if (v < max) return v;
    for (let shift = 0; ; shift += 7) {
      if (this.pos >= this.end) throw new HpackError('integer truncated at the end of the header block');
      if (shift > 28) throw new HpackError('integer longer than 2^31 allows');
      const b = src[this.pos++]!;
      v += (b & 0x7f) * 2 ** shift;
      if (v > INT_LIMIT) throw new HpackError('integer above 2^31 - 1');
      if (b < 0x80) return v;
    }
  }

  /** RFC 7541 5.2: a string literal, raw or Huffman-coded, as latin1. */
  private readString(): string {
    if (this.pos >= this.end) throw new HpackError('string literal missing at the end of the header block');
    const huffman = this.src[this.pos]! >= 0x80;
    const len = this.readInt(7);
    const start = this.pos;
    if (len > this.end - start) throw new HpackError(`string literal of ${len} octets, ${this.end - start} left in the block`);
    this.pos = start + len;
    if (!huffman) return this.src.toString('latin1', start, start + len);
    if (len < RECENT_MIN_OCTETS) return this.huffman(start, len);
    // Long Huffman strings repeat on a connection without being indexed (the :path nghttp2 never
    // indexes, the never-indexed authorization token): octets equal to a recent one give its text.
    for (const r of this.recent) {
      if (r.octets.length === len && this.src.compare(r.octets, 0, len, start, start + len) === 0) return r.text;
    }
    const text = this.huffman(start, len);
    const slot = { octets: Buffer.from(this.src.subarray(start, start + len)), text };
    if (this.recent.length < RECENT_STRINGS) this.recent.push(slot);
    else this.recent[this.recentNext] = slot;
    this.recentNext = (this.recentNext + 1) % RECENT_STRINGS;
    return text;
  }

  private huffman(start: number, len: number): string {
    const s = huffmanDecode(this.src, start, start + len);
    if (s === 'eos') throw new HpackError('Huffman string contains EOS');
    if (s === 'padding') throw new HpackError('Huffman string padding is longer than 7 bits or not all ones');
    return s;
  }
}

const STATIC_EXACT = new Map<string, number>();
const STATIC_NAME = new Map<string, number>();
STATIC_TABLE.forEach(([n, v], i) => {
  if (!STATIC_EXACT.has(`${n}\0${v}`)) STATIC_EXACT.set(`${n}\0${v}`, i + 1);
  if (!STATIC_NAME.has(n)) STATIC_NAME.set(n, i + 1);
});

/** Writes an integer with an N-bit prefix (RFC 7541 5.1), `flags` in the bits above the prefix. */
function writeInt(out: Buffer, pos: number, prefixBits: number, flags: number, v: number): number {
  const max = (1 << prefixBits) - 1;
  if (v < max) {
    out[pos] = flags | v;
    return pos + 1;
  }
  out[pos++] = flags | max;
  let rest = v - max;
  while (rest >= 0x80) {
    out[pos++] = (rest & 0x7f) | 0x80;
    rest = Math.floor(rest / 0x80);
  }
  out[pos] = rest;
  return pos + 1;
}

function writeString(out: Buffer, pos: number, s: string): number {
  const hlen = huffmanLength(s);
  if (hlen < 0) throw new HpackError('header field with a character above U+00FF (fields are octets: latin1)');
  if (hlen < s.length) return huffmanEncodeInto(s, out, writeInt(out, pos, 7, 0x80, hlen));
  const p = writeInt(out, pos, 7, 0, s.length);
  return p + out.write(s, p, 'latin1');
}

/**
 * One header block for `fields`, without dynamic table insertions: the same bytes on every
 * connection, so a constant response head or trailer can be encoded once at startup.
 */
export function encodeHeaderBlock(fields: readonly HeaderField[]): Buffer {
  let bound = 0;
  // 5 octets cover any integer below 2^28 beyond its prefix; lengths here are far below that.
  for (const [n, v] of fields) bound += 15 + n.length + v.length;
  const out = Buffer.allocUnsafe(bound);
  let pos = 0;
  for (const [name, value] of fields) {
    const exact = STATIC_EXACT.get(`${name}\0${value}`);
    if (exact !== undefined) {
      pos = writeInt(out, pos, 7, 0x80, exact);
      continue;
    }
    const nameIndex = STATIC_NAME.get(name);
    if (nameIndex !== undefined) pos = writeInt(out, pos, 4, 0, nameIndex);
    else pos = writeString(out, writeInt(out, pos, 4, 0, 0), name);
    pos = writeString(out, pos, value);
  }
  return out.subarray(0, pos);
}

/** Size update to 0 (001 00000): this encoder uses no dynamic table. */
const SIZE_UPDATE_ZERO = Buffer.from([0x20]);

/** The response-side encoder of one connection. */
export class HpackEncoder {
  private sizeUpdatePending = false;
  private sizeUpdateSent = false;

  /**
   * The peer's SETTINGS_HEADER_TABLE_SIZE changed (call it on each such SETTINGS). A peer that
   * lowers it below 4096 expects a dynamic table size update in the next block (RFC 7541 4.2),
   * so the next block starts with an update to 0, once: below any limit the peer may set later.
   */
  peerTableSizeChanged(): void {
    if (!this.sizeUpdateSent) this.sizeUpdatePending = true;
  }

  /** The header block for `fields`, after the pre-encoded `head` (from `encodeHeaderBlock`) if given. */
  encode(fields: readonly HeaderField[], head?: Uint8Array): Buffer {
    // A pre-encoded block alone (a constant response head or trailer): passed through as is.
    if (head !== undefined && fields.length === 0 && !this.sizeUpdatePending) return Buffer.isBuffer(head) ? head : Buffer.from(head.buffer, head.byteOffset, head.byteLength);
    const parts: Uint8Array[] = [];
    if (this.sizeUpdatePending) {
      parts.push(SIZE_UPDATE_ZERO);
      this.sizeUpdatePending = false;
      this.sizeUpdateSent = true;
    }
    if (head !== undefined) parts.push(head);
    if (fields.length > 0 || parts.length === 0) parts.push(encodeHeaderBlock(fields));
    return parts.length === 1 ? Buffer.from(parts[0]!.buffer, parts[0]!.byteOffset, parts[0]!.byteLength) : Buffer.concat(parts);
  }
}
