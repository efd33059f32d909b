/**
 * Strict protobuf decoding with protobufjs: `decodeStrict(type, bytes)` refuses (throws a
 * RangeError) every message that is not well-formed protobuf of `type`, instead of handing out a
 * shortened or misread value.
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
 *   skipping an unknown varint field takes any number of continuation bytes;
 * - its generated decoders read a known field by the field's type whatever wire type its tag
 *   says (`0a 01 41` for an int32 field 1: the length 1 read as the value, `41` as the next tag);
 *   field number 0 is skipped like an unknown field; an unknown group ends at the first end-group
 *   tag of any field number; and a string is whatever Node's decoding makes of its bytes (invalid
 *   UTF-8 becomes U+FFFD).
 *
 * `StrictReader` is protobufjs's BufferReader with those reads made strict, so a decode through it
 * gives exactly what protobufjs gives for well-formed bytes (strings decoded by Node, `bytes`
 * fields as Buffers sharing the input's memory) and throws for the rest. protobufjs's generated
 * decoders accept a Reader in place of the bytes and pass it to nested decoders, so the strict
 * reads apply at every depth. Before that decode, `checkFields` walks the tags of the message and
 * of every message nested in it against the type (`WireRules`, built once per type): a known
 * field must come with its type's wire type (or, repeated and packable, the packed form), no
 * field is numbered 0, an end-group tag closes the group its number opened and no other.
 *
 * UTF-8: proto3 requires every parser to refuse a `string` field that is not valid UTF-8 —
 * protobuf.dev, "UTF-8 Validation in Java": "For proto3 it was decided that all parsers must
 * validate UTF-8" (features.utf8_validation = VERIFY, the proto3 default; C++/upb and Go refuse
 * such bytes, the conformance suite's ProtobufInput.RejectInvalidUtf8 cases). Every type decoded
 * here comes from a proto3 file (ours, google.rpc, grpc.health.v1, the reflection protos), so
 * every string is checked: one scan of the decoded string for U+FFFD, and only a string that
 * holds one is checked byte by byte (`isUtf8`), so a literal U+FFFD sent as EF BF BD still reads.
 */
import { isUtf8 } from 'node:buffer';
import protobuf from 'protobufjs';

function outOfRange(reader: protobuf.Reader, length: number): RangeError {
  return new RangeError(`index out of range: ${reader.pos} + ${length} > ${reader.len}`);
}

const VARINT_MAX_BYTES = 10;
const REPLACEMENT = '\ufffd';

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

  /** A length-delimited UTF-8 string (decoded by Node, like BufferReader), refused when it runs past the end or is not valid UTF-8. */
  override string(): string {
    const length = this.uint32();
    const start = this.pos;
    const end = start + length;
    if (end > this.len) throw outOfRange(this, length);
    this.pos = end;
    const text = (this.buf as Buffer).toString('utf8', start, end);
    if (text.includes(REPLACEMENT) && !isUtf8(this.buf.subarray(start, end))) throw new RangeError(`string at ${start} is not valid UTF-8`);
    return text;
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

  /**
   * Walks the fields from `pos` to the end (`len`) against `rules` and leaves `pos` at the end:
   * throws for a field numbered 0, a known field with another wire type than its type's, an
   * end-group tag that closes no group or another field's, wire types 6 and 7, and anything that
   * runs past the end. Messages nested in known fields are walked with their own rules.
   */
  checkFields(rules: WireRules, depth = 0): void {
    if (depth > protobuf.Reader.recursionLimit) throw new RangeError('maximum nesting depth exceeded');
    const buf = this.buf;
    while (this.pos < this.len) {
      // A tag of one byte (fields 1-15) is read here; longer ones by uint32.
      const first = buf[this.pos]!;
      const tag = first < 128 ? (this.pos++, first) : this.uint32();
      const number = tag >>> 3;
      const wire = tag & 7;
      if (number === 0) throw new RangeError(`field number 0 at ${this.pos}`);
      const rule = rules[number];
      if (rule !== undefined && wire !== rule.wire && !(wire === 2 && rule.packable)) throw new RangeError(`field ${number}: wire type ${wire}, not ${rule.wire}`);
      if (wire !== 2) {
        this.#skipValue(number, wire, depth);
        continue;
      }
      const length = this.pos < this.len && buf[this.pos]! < 128 ? buf[this.pos++]! : this.uint32();
      const end = this.pos + length;
      if (end > this.len) throw outOfRange(this, length);
      if (rule?.message === undefined) {
        this.pos = end;
        continue;
      }
      const outer = this.len;
      this.len = end;
      this.checkFields(rule.message, depth + 1);
      this.len = outer;
    }
  }

  /** Skips the value of field `number` (wire type `wire`): a group up to its own end-group tag. */
  #skipValue(number: number, wire: number, depth: number): void {
    switch (wire) {
      case 0:
        this.skip();
        return;
      case 1:
        this.skip(8);
        return;
      case 2:
        this.skip(this.uint32());
        return;
      case 5:
        this.skip(4);
        return;
      case 3:
        if (depth >= protobuf.Reader.recursionLimit) throw new RangeError('maximum nesting depth exceeded');
        for (;;) {
          const tag = this.uint32();
          if (tag >>> 3 === 0) throw new RangeError(`field number 0 at ${this.pos}`);
          if ((tag & 7) === 4) {
            if (tag >>> 3 !== number) throw new RangeError(`end-group tag of field ${tag >>> 3} closes the group of field ${number}`);
            return;
          }
          this.#skipValue(tag >>> 3, tag & 7, depth + 1);
        }
      case 4:
        throw new RangeError(`end-group tag of field ${number} outside a group`);
      default:
        throw new RangeError(`invalid wire type ${wire} of field ${number}`);
    }
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

/** A known field's wire type, whether it also comes packed (repeated scalars and enums), and the rules of the message it holds. */
export interface FieldWire {
  readonly wire: number;
  readonly packable: boolean;
  readonly message: WireRules | undefined;
}

/** What `checkFields` knows of a message type: its fields, indexed by number (an array: the numbers are small). */
export type WireRules = ReadonlyArray<FieldWire | undefined>;

const rulesCache = new WeakMap<protobuf.Type, WireRules>();

/** The wire type a value of `field`'s (element or map value) type is written with, and the rules of its message. */
function valueWire(field: protobuf.FieldBase): { wire: number; message: WireRules | undefined } {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) return { wire: 2, message: wireRules(t) };
  if (t instanceof protobuf.Enum) return { wire: 0, message: undefined };
  const wire = (protobuf.types.basic as Record<string, number | undefined>)[field.type];
  if (wire === undefined) throw new Error(`${field.fullName}: no wire type for ${field.type}`);
  return { wire, message: undefined };
}

/** The rules of `type` (built once; a type that holds itself gets the same rules object). */
export function wireRules(type: protobuf.Type): WireRules {
  const known = rulesCache.get(type);
  if (known) return known;
  const rules: Array<FieldWire | undefined> = [];
  rulesCache.set(type, rules);
  for (const field of type.fieldsArray) {
    field.resolve();
    const value = valueWire(field);
    if (field instanceof protobuf.MapField) {
      const keyWire = (protobuf.types.mapKey as Record<string, number | undefined>)[field.keyType];
      if (keyWire === undefined) throw new Error(`${field.fullName}: no wire type for its key`);
      const entry = [undefined, { wire: keyWire, packable: false, message: undefined }, { wire: value.wire, packable: false, message: value.message }];
      rules[field.id] = { wire: 2, packable: false, message: entry };
    } else {
      rules[field.id] = { wire: value.wire, packable: field.repeated && value.wire !== 2, message: value.message };
    }
  }
  return rules;
}

/** A Buffer over the same memory as `bytes` (no copy). */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Decodes one whole message of `type` from `bytes` like `type.decode(bytes)` with a Buffer, but
 * throws a RangeError when the bytes are not well-formed protobuf of `type`: a field running past
 * the end of the bytes or of its enclosing message, a known field with the wrong wire type, field
 * number 0, an unmatched end-group tag, a string that is not UTF-8 (see the module comment).
 * `bytes` fields come out as Buffers over `bytes`' memory.
 */
export function decodeStrict(type: protobuf.Type, bytes: Uint8Array): protobuf.Message {
  const reader = new StrictReader(asBuffer(bytes));
  reader.checkFields(wireRules(type));
  reader.pos = 0;
  const message = type.decode(reader);
  if (reader.pos !== reader.len) throw outOfRange(reader, 0);
  return message;
}
