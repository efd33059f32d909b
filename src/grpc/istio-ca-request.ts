/**
 * `IstioCertificateRequest` (proto/istio/v1/auth/ca.proto) read by hand from its proto3 wire bytes,
 * for the CA's hot method: the same object protobufjs's `decode` + `toObject({ longs: Number,
 * defaults: true, oneofs: true })` builds (`csr` '' and `validity_duration` 0 when absent,
 * `metadata` null when absent, a google.protobuf.Struct as `{ fields: { k: Value } }` with each
 * Value's `kind`), at a fraction of its cost per call: no Reader, no message instances, no second
 * pass to plain objects. test/grpc/istio-ca-request.test.ts holds it to protobufjs on many encodings.
 *
 * Wire rules (protobuf encoding spec): tag = field << 3 | wire type; varints of at most 10 bytes;
 * unknown fields of wire types 0, 1, 2, 5 and groups (3 .. 4) are skipped. As protobufjs does: the
 * last occurrence of a singular field wins (a repeated `metadata` replaces, it is not merged), a
 * Value that carries several of its oneof members keeps them all and names the last in field order
 * as `kind`, a bool is its varint's low 32 bits != 0, nesting deeper than 100 messages is refused.
 * Stricter than protobufjs, and refused here: a known field with the wrong wire type, a length or a
 * varint that runs past the end (protobufjs keeps a truncated string at the very end of a message),
 * a map entry without its value (protobufjs fails on it later, in `toObject`).
 *
 * Anything refused throws `MalformedMessage`; the transport answers such a request
 * `MALFORMED_REQUEST` (src/ca/certificate-service.ts).
 */
import type { IstioCertificateRequest } from '../protocol/istio-ca.js';
import type { ProtoStruct, ProtoValue } from '../protocol/protobuf-types.js';

/** The bytes are not a well-formed message of the expected type. No stack: it says what, not where in our code. */
export class MalformedMessage extends Error {
  constructor(what: string, at: number) {
    super(`malformed protobuf message: ${what} at byte ${at}`);
    this.name = 'MalformedMessage';
  }
}

/** protoc's default recursion limit, as protobufjs's `util.recursionLimit`. */
const MAX_DEPTH = 100;

const VARINT = 0;
const FIXED64 = 1;
const LENGTH = 2;
const GROUP_START = 3;
const GROUP_END = 4;
const FIXED32 = 5;

/**
 * Node's Buffer method behind `toString('utf8', start, end)`, without its argument handling
 * (a fifth of this decoder's time); untyped in @types/node, on every Buffer since Node 0.x.
 */
interface Utf8SliceBuffer extends Buffer {
  utf8Slice(start: number, end: number): string;
}

/** A read position over one message's bytes. `lo`/`hi`: the last varint's low and high 32 bits. */
class Cursor {
  pos = 0;
  lo = 0;
  hi = 0;
  readonly buf: Utf8SliceBuffer;

  constructor(bytes: Uint8Array) {
    this.buf = (Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)) as Utf8SliceBuffer;
  }

  /** Reads a varint (at most 10 bytes) into `lo`/`hi`; returns `lo`. */
  varint(end: number): number {
    const b = this.buf;
    // Tags and short lengths: one byte.
    if (this.pos < end && b[this.pos]! < 0x80) {
      this.hi = 0;
      return (this.lo = b[this.pos++]!);
    }
    let lo = 0;
    let hi = 0;
    let shift = 0;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= end) throw new MalformedMessage('varint past the end', this.pos);
      const byte = b[this.pos++]!;
      if (i < 4) lo |= (byte & 0x7f) << shift;
      else if (i === 4) {
        lo |= (byte & 0x0f) << 28;
        hi = (byte & 0x7f) >>> 4;
      } else hi |= (byte & 0x7f) << (shift - 32);
      if (byte < 0x80) {
        this.lo = lo >>> 0;
        this.hi = hi >>> 0;
        return this.lo;
      }
      shift += 7;
    }
    throw new MalformedMessage('varint longer than 10 bytes', this.pos);
  }

  /** A length prefix; returns where the delimited bytes end (checked against `end`). */
  delimited(end: number): number {
    const len = this.varint(end);
    if (this.hi !== 0 || len > end - this.pos) throw new MalformedMessage('length past the end', this.pos);
    return this.pos + len;
  }

  string(end: number): string {
    const stop = this.delimited(end);
    const s = this.buf.utf8Slice(this.pos, stop);
    this.pos = stop;
    return s;
  }

  /** Skips an unknown field's value of `wireType`. */
  skip(wireType: number, end: number, depth: number): void {
    if (depth > MAX_DEPTH) throw new MalformedMessage('nesting deeper than 100', this.pos);
    switch (wireType) {
      case VARINT:
        this.varint(end);
        return;
      case FIXED64:
        this.advance(8, end);
        return;
      case LENGTH:
        this.pos = this.delimited(end);
        return;
      case FIXED32:
        this.advance(4, end);
        return;
      case GROUP_START:
        for (;;) {
          const wt = this.varint(end) & 7;
          if (wt === GROUP_END) return;
          this.skip(wt, end, depth + 1);
        }
      default:
        throw new MalformedMessage(`wire type ${wireType}`, this.pos);
    }
  }

  advance(n: number, end: number): void {
    if (n > end - this.pos) throw new MalformedMessage('fixed-size value past the end', this.pos);
    this.pos += n;
  }
}

function expect(c: Cursor, wireType: number, wanted: number): void {
  if (wireType !== wanted) throw new MalformedMessage(`wire type ${wireType} for a field of type ${wanted}`, c.pos);
}

/** int64 from a varint's two halves, as protobufjs's LongBits.toNumber (two's complement, as a double). */
function int64(lo: number, hi: number): number {
  if (hi >>> 31) {
    let l = (~lo + 1) >>> 0;
    let h = ~hi >>> 0;
    if (!l) h = (h + 1) >>> 0;
    return -(l + h * 4294967296);
  }
  return lo + hi * 4294967296;
}

/** Own data property, also for `__proto__` (which plain assignment would treat as the prototype). */
function put<T>(obj: Record<string, T>, key: string, value: T): void {
  if (key === '__proto__') Object.defineProperty(obj, key, { value, enumerable: true, configurable: true, writable: true });
  else obj[key] = value;
}

/**
 * The repeated length-delimited field 1 of a message ending at `end` (Struct's entries, ListValue's
 * values): `each` gets the end of every occurrence with the cursor at its start; other fields are skipped.
 */
function eachField1(c: Cursor, end: number, depth: number, each: (fieldEnd: number) => void): void {
  while (c.pos < end) {
    const tag = c.varint(end);
    if (tag >>> 3 !== 1) {
      c.skip(tag & 7, end, depth);
      continue;
    }
    expect(c, tag & 7, LENGTH);
    each(c.delimited(end));
  }
}

/** google.protobuf.Struct: `map<string, Value> fields = 1`. */
function struct(c: Cursor, end: number, depth: number): ProtoStruct {
  if (depth > MAX_DEPTH) throw new MalformedMessage('nesting deeper than 100', c.pos);
  const fields: Record<string, ProtoValue> = {};
  eachField1(c, end, depth, (entryEnd) => {
    let key = '';
    let value: ProtoValue | undefined;
    while (c.pos < entryEnd) {
      const t = c.varint(entryEnd);
      const field = t >>> 3;
      if (field === 1) {
        expect(c, t & 7, LENGTH);
        key = c.string(entryEnd);
      } else if (field === 2) {
        expect(c, t & 7, LENGTH);
        value = protoValue(c, c.delimited(entryEnd), depth + 1);
      } else c.skip(t & 7, entryEnd, depth);
    }
    if (value === undefined) throw new MalformedMessage('Struct entry without a value', c.pos);
    put(fields, key, value);
  });
  return { fields };
}

/** google.protobuf.Value, every member it carries, `kind` the last of them in field order. */
function protoValue(c: Cursor, end: number, depth: number): ProtoValue {
  if (depth > MAX_DEPTH) throw new MalformedMessage('nesting deeper than 100', c.pos);
  let nullValue: number | undefined;
  let numberValue: number | undefined;
  let stringValue: string | undefined;
  let boolValue: boolean | undefined;
  let structValue: ProtoStruct | undefined;
  let listValue: { values: ProtoValue[] } | undefined;
  while (c.pos < end) {
    const tag = c.varint(end);
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        expect(c, wt, VARINT);
        nullValue = c.varint(end) | 0;
        break;
      case 2:
        expect(c, wt, FIXED64);
        c.advance(8, end);
        numberValue = c.buf.readDoubleLE(c.pos - 8);
        break;
      case 3:
        expect(c, wt, LENGTH);
        stringValue = c.string(end);
        break;
      case 4:
        expect(c, wt, VARINT);
        boolValue = c.varint(end) !== 0;
        break;
      case 5:
        expect(c, wt, LENGTH);
        structValue = struct(c, c.delimited(end), depth + 1);
        break;
      case 6:
        expect(c, wt, LENGTH);
        listValue = list(c, c.delimited(end), depth + 1);
        break;
      default:
        c.skip(wt, end, depth);
    }
  }
  const v: { -readonly [K in keyof ProtoValue]: ProtoValue[K] } = {};
  if (nullValue !== undefined) (v.nullValue = nullValue), (v.kind = 'nullValue');
  if (numberValue !== undefined) (v.numberValue = numberValue), (v.kind = 'numberValue');
  if (stringValue !== undefined) (v.stringValue = stringValue), (v.kind = 'stringValue');
  if (boolValue !== undefined) (v.boolValue = boolValue), (v.kind = 'boolValue');
  if (structValue !== undefined) (v.structValue = structValue), (v.kind = 'structValue');
  if (listValue !== undefined) (v.listValue = listValue), (v.kind = 'listValue');
  return v;
}

/** google.protobuf.ListValue: `repeated Value values = 1`. */
function list(c: Cursor, end: number, depth: number): { values: ProtoValue[] } {
  if (depth > MAX_DEPTH) throw new MalformedMessage('nesting deeper than 100', c.pos);
  const values: ProtoValue[] = [];
  eachField1(c, end, depth, (valueEnd) => values.push(protoValue(c, valueEnd, depth + 1)));
  return { values };
}

/** The request in `bytes` (one gRPC message, unframed); throws `MalformedMessage`. */
export function decodeIstioCertificateRequest(bytes: Uint8Array): IstioCertificateRequest {
  const c = new Cursor(bytes);
  const end = bytes.length;
  let csr = '';
  let validity = 0;
  let metadata: ProtoStruct | null = null;
  while (c.pos < end) {
    const tag = c.varint(end);
    const wt = tag & 7;
    switch (tag >>> 3) {
      case 1:
        expect(c, wt, LENGTH);
        csr = c.string(end);
        break;
      case 3:
        expect(c, wt, VARINT);
        c.varint(end);
        validity = int64(c.lo, c.hi);
        break;
      case 4:
        expect(c, wt, LENGTH);
        metadata = struct(c, c.delimited(end), 1);
        break;
      default:
        c.skip(wt, end, 0);
    }
  }
  return { csr, validity_duration: validity, metadata };
}
