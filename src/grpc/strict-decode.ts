/**
 * Strict protobuf decoding with protobufjs: `decodeStrict(type, bytes)` refuses (throws a
 * RangeError) every message whose wire format ends early, instead of handing out a shortened value.
 *
 * protobufjs 7 (src/reader.js, src/reader_buffer.js) bounds-checks most reads, and a nested
 * message's reads are limited to the nested message (its decoder narrows `reader.len` to the
 * declared end and checks it lands there), but:
 *
 * - with a Node Buffer (what grpc-js hands every deserializer) it reads with its BufferReader,
 *   whose `string()` clamps a string running past the end of the buffer, or past the end of the
 *   enclosing message, to what is there: `0a 7f 41 42` (field 1 declared 127 bytes, 2 follow)
 *   decodes as "AB". Its `bytes()` (the base Reader's) throws. From a plain Uint8Array the base
 *   Reader's `string()` throws too, but decodes with protobufjs's own UTF-8 reader (not Node's:
 *   different output for invalid UTF-8) and hands `bytes` fields out as Uint8Array, not Buffer;
 * - with either input, a 64-bit varint (int64, uint64, sint64) with fewer than 5 bytes left before
 *   the end is read as complete after 4 bytes whatever their continuation bits, and one with
 *   fewer than 4 left reads past the end as zeros: `30 80 80 80` decodes as int64 0;
 * - a 32-bit varint (tags, lengths, int32, uint32, enums, bool) of 6 to 9 bytes (valid: a 64-bit
 *   value written to a 32-bit field) is read as 10 bytes, and one longer than 10 is not refused;
 *   skipping an unknown varint field takes any number of continuation bytes.
 *
 * `StrictReader` is protobufjs's BufferReader with those reads made strict, so a decode through it
 * gives exactly what protobufjs gives for well-formed bytes (strings decoded by Node, `bytes`
 * fields as Buffers sharing the input's memory) and throws for the rest. protobufjs's generated
 * decoders accept a Reader in place of the bytes and pass it to nested decoders, so the strict
 * reads apply at every depth. Still lenient, as in protobufjs and unrelated to truncation: the
 * wire type of a known field is not checked against its type, field number 0 is skipped like an
 * unknown field, an unknown group's end tag is not matched against its start tag, and strings are
 * not checked for valid UTF-8 (Node's decoding replaces bad sequences with U+FFFD).
 */
import protobuf from 'protobufjs';

function outOfRange(reader: protobuf.Reader, length: number): RangeError {
  return new RangeError(`index out of range: ${reader.pos} + ${length} > ${reader.len}`);
}

const VARINT_MAX_BYTES = 10;

/** protobufjs's BufferReader with every read refusing bytes that run past the end (see the module comment). */
export class StrictReader extends protobuf.BufferReader {
  constructor(buffer: Buffer) {
    super(buffer);
  }

  /** A varint as an unsigned 32-bit value (the low 32 bits of up to 10 bytes, the last one ending it). */
  override uint32(): number {
    const buf = this.buf;
    const len = this.len;
    let pos = this.pos;
    if (pos >= len) throw outOfRange(this, 1);
    let b = buf[pos++]!;
    if (b < 128) {
      this.pos = pos;
      return b;
    }
    let value = b & 127;
    for (let shift = 7; shift < 35; shift += 7) {
      if (pos >= len) throw outOfRange(this, pos - this.pos + 1);
      b = buf[pos++]!;
      value |= (b & 127) << shift;
      if (b < 128) {
        this.pos = pos;
        return value >>> 0;
      }
    }
    // Five bytes had a continuation bit: the rest carries bits above 32 (dropped, as protobufjs does).
    for (let i = 5; i < VARINT_MAX_BYTES; i++) {
      if (pos >= len) throw outOfRange(this, pos - this.pos + 1);
      b = buf[pos++]!;
      if (b < 128) {
        if (i === VARINT_MAX_BYTES - 1 && b > 1) throw new RangeError('varint overflows 64 bits');
        this.pos = pos;
        return value >>> 0;
      }
    }
    throw new RangeError('varint longer than 10 bytes');
  }

  override int32(): number {
    return this.uint32() | 0;
  }

  override sint32(): number {
    const value = this.uint32();
    return ((value >>> 1) ^ -(value & 1)) | 0;
  }

  override bool(): boolean {
    return this.uint32() !== 0;
  }

  /** A length-delimited UTF-8 string (decoded by Node, like BufferReader), refused when it runs past the end. */
  override string(): string {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.len) throw outOfRange(this, length);
    this.pos = end;
    return (this.buf as Buffer).toString('utf8', start, end);
  }

  override int64(): protobuf.Long {
    this.#completeVarint();
    return super.int64();
  }

  override uint64(): protobuf.Long {
    this.#completeVarint();
    return super.uint64();
  }

  override sint64(): protobuf.Long {
    this.#completeVarint();
    return super.sint64();
  }

  override skip(length?: number): this {
    if (typeof length === 'number') {
      if (length < 0 || this.pos + length > this.len) throw outOfRange(this, length);
      this.pos += length;
      return this;
    }
    this.#completeVarint();
    while (this.buf[this.pos++]! & 128);
    return this;
  }

  /** Throws unless a whole varint (at most 10 bytes, not overflowing 64 bits) starts at `pos` before the end. */
  #completeVarint(): void {
    const buf = this.buf;
    const stop = Math.min(this.len, this.pos + VARINT_MAX_BYTES);
    for (let at = this.pos; at < stop; at++) {
      const b = buf[at]!;
      if (b < 128) {
        if (at - this.pos === VARINT_MAX_BYTES - 1 && b > 1) throw new RangeError('varint overflows 64 bits');
        return;
      }
    }
    throw stop === this.len ? outOfRange(this, stop - this.pos + 1) : new RangeError('varint longer than 10 bytes');
  }
}

/** A Buffer over the same memory as `bytes` (no copy). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Decodes one whole message of `type` from `bytes` like `type.decode(bytes)` with a Buffer, but
 * throws a RangeError when any field runs past the end of the bytes or of its enclosing message
 * (see the module comment). `bytes` fields come out as Buffers over `bytes`' memory.
 */
export function decodeStrict(type: protobuf.Type, bytes: Uint8Array): protobuf.Message {
  const reader = new StrictReader(asBuffer(bytes));
  const message = type.decode(reader);
  if (reader.pos !== reader.len) throw outOfRange(reader, 0);
  return message;
}
