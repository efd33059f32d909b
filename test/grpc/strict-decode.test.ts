/**
 * Strict protobuf decoding (src/grpc/strict-decode.ts) and the deserializers built on it:
 *
 * - what protobufjs itself does with bytes that end early, from a Buffer and from a plain
 *   Uint8Array (the facts the module comment states), and that `decodeStrict` refuses all of it;
 * - what it misreads though nothing is cut (a known field with another wire type, field number 0,
 *   a group closed by another field's end tag, a string that is not UTF-8), refused as well, and
 *   the well-formed neighbours of those (packed and unpacked, a literal U+FFFD) read alike;
 * - a property test over every request and response type of the grpc-js services built from
 *   proto/ (Broker API, Workload API, health, the Istio CA), the reflection request types (through
 *   `addReflection`'s own deserializers), google.rpc.Status and the Broker API's packed references:
 *   seeded random messages decode exactly as protobufjs decodes them (same values, Buffers where
 *   it gave Buffers), and every truncation — each prefix of the encoding, and each shortening of a
 *   length-delimited field at any depth with the enclosing lengths rewritten to match — decodes to
 *   exactly what an independent strict reference decoder (written here from the wire format:
 *   wire types checked, field 0 and unmatched end-group tags refused, strings through a fatal
 *   TextDecoder) gives, or is refused where the reference refuses; never a clamped string.
 */
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import type { MethodDefinition, Server, ServiceDefinition } from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import protobuf from 'protobufjs';
import { parseReference } from '../../src/broker/fronts/broker-api/index.js';
import { addReflection } from '../../src/grpc/reflection.js';
import { decodeRpcStatus, decodeStrict, loadProtos, MESSAGE_OBJECT_OPTIONS, servicesPackageDefinition } from '../../src/grpc/index.js';
import { HEALTH_PROTO } from '../../src/protocol/grpc-health.js';
import { RPC_STATUS_PROTOS } from '../../src/protocol/grpc-status.js';
import { CA_PROTO } from '../../src/protocol/istio-ca.js';
import { BROKER_PROTO, REFERENCE_PROTO, REFERENCE_TYPES } from '../../src/protocol/spiffe-broker.js';
import { WORKLOAD_API_PROTO } from '../../src/protocol/workload-api.js';
import { seededRng } from '../support/seeded-rng.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/ /g, ''), 'hex');

// ---------------------------------------------------------------------------------------------
// 1. protobufjs's own behaviour
// ---------------------------------------------------------------------------------------------

const probeJson: Record<string, unknown> = {
  nested: {
    Inner: { fields: { s: { type: 'string', id: 1 }, b: { type: 'bytes', id: 2 } } },
    M: {
      fields: {
        s: { type: 'string', id: 1 },
        b: { type: 'bytes', id: 2 },
        f32: { type: 'fixed32', id: 3 },
        f64: { type: 'fixed64', id: 4 },
        i32: { type: 'int32', id: 5 },
        i64: { type: 'int64', id: 6 },
        inner: { type: 'Inner', id: 7 },
        d: { type: 'double', id: 8 },
        u64: { type: 'uint64', id: 9 },
        packed: { rule: 'repeated', type: 'int64', id: 10 },
        map: { keyType: 'string', type: 'bytes', id: 11 },
      },
    },
  },
};
const M = protobuf.Root.fromJSON(probeJson as protobuf.INamespace).lookupType('M');

type Outcome = 'refused' | Record<string, unknown>;
const outcome = (decode: () => protobuf.Message): Outcome => {
  try {
    return M.toObject(decode(), { longs: String }) as Record<string, unknown>;
  } catch {
    return 'refused';
  }
};

/** [what, bytes, protobufjs from a Buffer, protobufjs from a Uint8Array]; decodeStrict refuses every one. */
const TRUNCATED: ReadonlyArray<readonly [string, string, Outcome, Outcome]> = [
  ['string declared 127 bytes, 2 follow', '0a 7f 41 42', { s: 'AB' }, 'refused'],
  ['bytes declared 127 bytes, 2 follow', '12 7f 41 42', 'refused', 'refused'],
  ["nested string past its message's end (3-byte Inner, string of 5)", '3a 03 0a 05 41', { inner: { s: 'A' } }, 'refused'],
  ['nested string past the end of the buffer', '3a 03 0a 7f 41', { inner: { s: 'A' } }, 'refused'],
  ['nested message declared past the end', '3a 7f 0a 01 41', 'refused', 'refused'],
  ['nested bytes past its message', '3a 03 12 05 41', 'refused', 'refused'],
  ['map entry past its end', '5a 05 0a 01 61 12 7f', 'refused', 'refused'],
  ['fixed32 with 2 of 4 bytes', '1d 01 02', 'refused', 'refused'],
  ['fixed64 with 5 of 8 bytes', '21 01 02 03 04 05', 'refused', 'refused'],
  ['double with 3 of 8 bytes', '41 01 02 03', 'refused', 'refused'],
  ['int32 varint cut after 2 continuation bytes', '28 80 80', 'refused', 'refused'],
  ['int64 varint cut after 3 continuation bytes', '30 80 80 80', { i64: '0' }, { i64: '0' }],
  ['int64 2^28 (5 bytes) cut to 4', '30 80 80 80 80', { i64: '0' }, { i64: '0' }],
  ['uint64 varint cut after 9 continuation bytes', '48 ff ff ff ff ff ff ff ff ff', 'refused', 'refused'],
  ['packed int64 with a cut varint', '52 02 80 80', 'refused', 'refused'],
  ['unknown length-delimited field past the end', 'a2 06 7f 41', 'refused', 'refused'],
  ['unknown fixed64 with 2 of 8 bytes', 'a1 06 01 02', 'refused', 'refused'],
  ['unknown varint cut', 'a0 06 80', 'refused', 'refused'],
  ['unknown group without its end', 'a3 06 08 01', 'refused', 'refused'],
  ['tag varint cut', '80', 'refused', 'refused'],
  ['end-group tag at the top level', '0c', 'refused', 'refused'],
  // Not truncations, but misread by protobufjs's 32-bit varint reader: an 11-byte varint (too long)
  // and a 6-byte one (valid) read as 10 bytes.
  ['11-byte int32 varint', '28 ff ff ff ff ff ff ff ff ff ff 01', 'refused', 'refused'],
  ['int64 varint of 10 bytes whose last byte overflows', '30 ff ff ff ff ff ff ff ff ff 7f', { i64: '-1' }, { i64: '-1' }],
  ['unknown varint of 11 bytes', 'a0 06 ff ff ff ff ff ff ff ff ff ff 01', {}, {}],
];

describe('protobufjs decode of bytes that end early (Buffer vs Uint8Array), and decodeStrict', () => {
  for (const [what, bytes, fromBuffer, fromArray] of TRUNCATED) {
    it(what, () => {
      const buf = hex(bytes);
      const array = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
      assert.deepEqual(outcome(() => M.decode(buf)), fromBuffer, 'protobufjs, Buffer input');
      assert.deepEqual(outcome(() => M.decode(array)), fromArray, 'protobufjs, Uint8Array input');
      assert.equal(outcome(() => decodeStrict(M, buf)), 'refused', 'decodeStrict, Buffer');
      assert.equal(outcome(() => decodeStrict(M, array)), 'refused', 'decodeStrict, Uint8Array');
    });
  }

  it('a 6-byte varint in an int32 field (a 64-bit value written to it) is read by decodeStrict, misread by protobufjs', () => {
    // int32 field 5 = 0xffffffff (low 32 bits of 0x0fffffffff), then string field 1 = "A".
    const buf = hex('28 ff ff ff ff ff 01 0a 01 41');
    assert.equal(outcome(() => M.decode(buf)), 'refused');
    assert.deepEqual(outcome(() => decodeStrict(M, buf)), { i32: -1, s: 'A' });
  });

  it('well-formed bytes decode the same: strings by Node, bytes as Buffers over the input', () => {
    const buf = hex('0a 03 c3 a9 41 12 03 01 02 03 3a 04 12 02 04 05');
    assert.deepEqual(M.toObject(M.decode(buf)), { s: 'éA', b: hex('010203'), inner: { b: hex('0405') } });
    const strict = M.toObject(decodeStrict(M, buf)) as { s: string; b: Buffer; inner: { b: Buffer } };
    assert.deepEqual(strict, M.toObject(M.decode(buf)));
    assert.ok(Buffer.isBuffer(strict.b) && Buffer.isBuffer(strict.inner.b));
    assert.equal(strict.b.buffer, buf.buffer, 'no copy');
    const fromArray = M.toObject(decodeStrict(M, new Uint8Array(buf))) as { b: Buffer };
    assert.ok(Buffer.isBuffer(fromArray.b), 'a Uint8Array input gives Buffers too');
  });

  it('protobufjs decodes invalid UTF-8 its own way from a Uint8Array, as U+FFFD from a Buffer', () => {
    const buf = hex('0a 02 c3 28');
    assert.equal((M.toObject(M.decode(buf)) as { s: string }).s, '\ufffd(');
    assert.equal((M.toObject(M.decode(new Uint8Array(buf))) as { s: string }).s, 'è');
    assert.throws(() => decodeStrict(M, buf), RangeError);
  });
});

/** [what, bytes, protobufjs from a Buffer]: not well-formed protobuf of M, though protobufjs reads it; decodeStrict refuses every one. */
const MISREAD: ReadonlyArray<readonly [string, string, Record<string, unknown>]> = [
  // A known field with another wire type than its type's: protobufjs reads by the field's type.
  ['int32 field sent length-delimited', '2a 00', { i32: 0 }],
  ['string field sent as a varint (the varint read as the length)', '08 02 41 42', { s: 'AB' }],
  ['message field sent as fixed32', '3d 02 0a 00', { inner: { s: '' } }],
  ['double field sent as a varint', '40 00 00 00 00 00 00 f0 3f', { d: 1 }],
  ['bytes field sent as a group start', '13 00', { b: Buffer.alloc(0) }],
  ["map entry's bytes value sent as a varint", '5a 05 0a 01 61 10 00', { map: { a: Buffer.alloc(0) } }],
  // Field number 0: not a field number (1 to 2^29-1); protobufjs skips it.
  ['field 0, varint', '00 01 0a 01 41', { s: 'A' }],
  ['field 0, length-delimited', '02 01 ff 0a 01 41', { s: 'A' }],
  ['field 0 inside a nested message', '3a 02 00 00', { inner: {} }],
  // An unknown group must end with its own field's end-group tag; protobufjs ends it at any.
  ["group of field 100 closed by field 101's end tag", 'a3 06 ac 06 0a 01 41', { s: 'A' }],
  ["group closed by field 0's end tag", 'a3 06 04', {}],
  ['nested groups closed crosswise', 'a3 06 ab 06 a4 06 ac 06', {}],
  // A proto3 string that is not UTF-8: protobufjs (Node) reads U+FFFD for each bad sequence.
  ['string: a lone continuation byte', '0a 01 80', { s: '\ufffd' }],
  ['string: a 2-byte sequence cut at its end', '0a 02 41 c3', { s: 'A\ufffd' }],
  ['string: overlong encoding of "/"', '0a 02 c0 af', { s: '\ufffd\ufffd' }],
  ['string: a UTF-16 surrogate (ED A0 80)', '0a 03 ed a0 80', { s: '\ufffd\ufffd\ufffd' }],
  ['string: a code point above U+10FFFF', '0a 04 f4 90 80 80', { s: '\ufffd\ufffd\ufffd\ufffd' }],
  ["string: 0xff in a nested message's string", '3a 03 0a 01 ff', { inner: { s: '\ufffd' } }],
  ['string: 0xff in a map key', '5a 05 0a 01 ff 12 00', { map: { '\ufffd': Buffer.alloc(0) } }],
];

/** [what, bytes, decoded]: well-formed, read alike by protobufjs and decodeStrict. */
const WELL_FORMED: ReadonlyArray<readonly [string, string, Record<string, unknown>]> = [
  ['an unknown group closed by its own end tag', 'a3 06 08 01 a4 06 0a 01 41', { s: 'A' }],
  ['U+FFFD itself (EF BF BD) in a string', '0a 03 ef bf bd', { s: '\ufffd' }],
  ['0xff in a bytes field', '12 01 ff', { b: hex('ff') }],
  ['0xff in an unknown length-delimited field (bytes to anyone who does not know it)', 'a2 06 01 ff', {}],
  ['a repeated int64 packed', '52 02 01 02', { packed: ['1', '2'] }],
  ['the same unpacked', '50 01 50 02', { packed: ['1', '2'] }],
];

describe('bytes protobufjs misreads (wire types, field 0, groups, UTF-8), and decodeStrict', () => {
  for (const [what, bytes, fromBuffer] of MISREAD) {
    it(what, () => {
      const buf = hex(bytes);
      assert.deepEqual(outcome(() => M.decode(buf)), fromBuffer, 'protobufjs, Buffer input');
      assert.throws(() => decodeStrict(M, buf), RangeError, 'decodeStrict, Buffer');
      assert.throws(() => decodeStrict(M, new Uint8Array(buf)), RangeError, 'decodeStrict, Uint8Array');
    });
  }
  for (const [what, bytes, decoded] of WELL_FORMED) {
    it(`read: ${what}`, () => {
      const buf = hex(bytes);
      assert.deepEqual(outcome(() => M.decode(buf)), decoded, 'protobufjs');
      assert.deepEqual(outcome(() => decodeStrict(M, buf)), decoded, 'decodeStrict');
    });
  }

  it('a message nested deeper than protobufjs\'s recursion limit is refused by the wire check too', () => {
    const Inner = protobuf.Root.fromJSON({ nested: { R: { fields: { r: { type: 'R', id: 1 } } } } }).lookupType('R');
    let bytes = Buffer.alloc(0);
    for (let i = 0; i < protobuf.Reader.recursionLimit + 5; i++) bytes = Buffer.concat([Buffer.from([0x0a, ...encodeVarint(bytes.length)]), bytes]);
    assert.throws(() => decodeStrict(Inner, bytes), /nesting depth/);
  });
});

// ---------------------------------------------------------------------------------------------
// 2. The reference: a strict decoder written from the wire format
// ---------------------------------------------------------------------------------------------

class Refused extends Error {}

function varint(buf: Buffer, pos: number, end: number): { value: bigint; pos: number } {
  let value = 0n;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) throw new Refused('varint runs past the end');
    const b = buf[pos++]!;
    value |= BigInt(b & 0x7f) << BigInt(7 * i);
    if (b < 0x80) {
      if (i === 9 && b > 1) throw new Refused('varint overflows');
      return { value, pos };
    }
  }
  throw new Refused('varint longer than 10 bytes');
}

/** Length-delimited payload bounds, refused when they run past `end`. */
function delimited(buf: Buffer, pos: number, end: number): { start: number; end: number } {
  const { value, pos: start } = varint(buf, pos, end);
  if (BigInt(start) + value > BigInt(end)) throw new Refused('length runs past the end');
  return { start, end: start + Number(value) };
}

const WIRE: Record<string, number> = {
  double: 1, fixed64: 1, sfixed64: 1,
  float: 5, fixed32: 5, sfixed32: 5,
  int32: 0, uint32: 0, sint32: 0, int64: 0, uint64: 0, sint64: 0, bool: 0,
  string: 2, bytes: 2,
};

function skipField(buf: Buffer, wire: number, number: number, pos: number, end: number): number {
  switch (wire) {
    case 0:
      return varint(buf, pos, end).pos;
    case 1:
      if (pos + 8 > end) throw new Refused('fixed64 runs past the end');
      return pos + 8;
    case 5:
      if (pos + 4 > end) throw new Refused('fixed32 runs past the end');
      return pos + 4;
    case 2:
      return delimited(buf, pos, end).end;
    case 3:
      for (;;) {
        const tag = varint(buf, pos, end);
        pos = tag.pos;
        const w = Number(tag.value & 7n);
        const n = Number(tag.value >> 3n);
        if (n === 0) throw new Refused('field number 0 in a group');
        if (w === 4) {
          if (n !== number) throw new Refused(`end-group tag of field ${n} in the group of field ${number}`);
          return pos;
        }
        pos = skipField(buf, w, n, pos, end);
      }
    default:
      throw new Refused(`wire type ${wire} of field ${number}`);
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A proto3 string's text: its bytes must be UTF-8. */
function utf8(bytes: Buffer): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new Refused('string is not valid UTF-8');
  }
}

/** One scalar of `type` at `pos` (its wire type already checked), as toObject with MESSAGE_OBJECT_OPTIONS gives it. */
function scalar(buf: Buffer, type: string, pos: number, end: number): { value: unknown; pos: number } {
  if (type === 'string' || type === 'bytes') {
    const d = delimited(buf, pos, end);
    return { value: type === 'string' ? utf8(buf.subarray(d.start, d.end)) : buf.subarray(d.start, d.end), pos: d.end };
  }
  const wire = WIRE[type]!;
  if (wire === 1 || wire === 5) {
    const n = wire === 1 ? 8 : 4;
    if (pos + n > end) throw new Refused(`${type} runs past the end`);
    const value =
      type === 'double' ? buf.readDoubleLE(pos)
      : type === 'float' ? buf.readFloatLE(pos)
      : type === 'fixed32' ? buf.readUInt32LE(pos)
      : type === 'sfixed32' ? buf.readInt32LE(pos)
      : type === 'fixed64' ? Number(buf.readBigUInt64LE(pos))
      : Number(buf.readBigInt64LE(pos));
    return { value, pos: pos + n };
  }
  const v = varint(buf, pos, end);
  const low = BigInt.asUintN(32, v.value);
  const value =
    type === 'int32' ? Number(BigInt.asIntN(32, v.value))
    : type === 'uint32' ? Number(low)
    : type === 'sint32' ? Number(BigInt.asIntN(32, (low >> 1n) ^ -(low & 1n)))
    : type === 'bool' ? v.value !== 0n
    : type === 'int64' ? Number(BigInt.asIntN(64, v.value))
    : type === 'uint64' ? Number(BigInt.asUintN(64, v.value))
    : Number(BigInt.asIntN(64, (BigInt.asUintN(64, v.value) >> 1n) ^ -(v.value & 1n)));
  return { value, pos: v.pos };
}

const SCALAR_DEFAULT: Record<string, () => unknown> = {
  string: () => '', bytes: () => Buffer.alloc(0), bool: () => false,
};

function defaultOf(field: protobuf.FieldBase): unknown {
  if (field.map) return {};
  if (field.repeated) return [];
  if (field.resolvedType instanceof protobuf.Type) return null;
  if (field.resolvedType instanceof protobuf.Enum) return field.resolvedType.valuesById[0] ?? 0;
  return (SCALAR_DEFAULT[field.type] ?? (() => 0))();
}

function enumValue(e: protobuf.Enum, n: unknown): unknown {
  return e.valuesById[n as number] ?? n;
}

/** A value of `field`'s element type (message, enum or scalar) at `pos`. */
function element(buf: Buffer, field: protobuf.FieldBase, pos: number, end: number): { value: unknown; pos: number } {
  const t = field.resolvedType;
  if (t instanceof protobuf.Type) {
    const d = delimited(buf, pos, end);
    return { value: reference(t, buf, d.start, d.end), pos: d.end };
  }
  if (t instanceof protobuf.Enum) {
    const v = scalar(buf, 'int32', pos, end);
    return { value: enumValue(t, v.value), pos: v.pos };
  }
  return scalar(buf, field.type, pos, end);
}

/** An absent message value of a map entry: protobufjs keeps null, and its toObject fails on it unless a later entry replaces it. */
const ABSENT_MESSAGE = Symbol('absent map value');

/** A map entry: key 1, value 2 (absent: their defaults, as protobufjs leaves them — see below). */
function mapEntry(buf: Buffer, field: protobuf.MapField, start: number, end: number): [string, unknown] {
  let key: unknown = field.keyType === 'string' ? '' : 0;
  let value: unknown;
  let hasValue = false;
  let pos = start;
  while (pos < end) {
    const tag = varint(buf, pos, end);
    pos = tag.pos;
    const number = Number(tag.value >> 3n);
    const wire = Number(tag.value & 7n);
    if (number === 0) throw new Refused('field number 0 in a map entry');
    const valueWire = field.resolvedType instanceof protobuf.Type ? 2 : field.resolvedType ? 0 : WIRE[field.type];
    if ((number === 1 && wire !== WIRE[field.keyType]) || (number === 2 && wire !== valueWire)) throw new Refused(`map entry field ${number}: wire type ${wire}`);
    if (number === 1) ({ value: key, pos } = scalar(buf, field.keyType, pos, end));
    else if (number === 2) {
      ({ value, pos } = element(buf, field, pos, end));
      hasValue = true;
    } else pos = skipField(buf, wire, number, pos, end);
  }
  if (!hasValue) {
    // protobufjs's decoder leaves an absent value as its `types.defaults` entry: a fresh [] for
    // bytes, null for a message (which its toObject then fails on). Kept as they are.
    if (field.resolvedType instanceof protobuf.Type) return [String(key), ABSENT_MESSAGE];
    value = field.type === 'bytes' ? [] : field.resolvedType instanceof protobuf.Enum ? 0 : (SCALAR_DEFAULT[field.type] ?? (() => 0))();
  }
  return [String(key), value];
}

/** The message of `type` in buf[start, end), as toObject(…, MESSAGE_OBJECT_OPTIONS) shapes it. */
function reference(type: protobuf.Type, buf: Buffer, start = 0, end = buf.length): Record<string, unknown> {
  const set = new Map<string, unknown>();
  let pos = start;
  while (pos < end) {
    const tag = varint(buf, pos, end);
    pos = tag.pos;
    const number = Number(tag.value >> 3n);
    const wire = Number(tag.value & 7n);
    if (number === 0) throw new Refused('field number 0');
    const field = type.fieldsById[number];
    if (!field) {
      pos = skipField(buf, wire, number, pos, end);
      continue;
    }
    field.resolve();
    const elementWire = field.resolvedType instanceof protobuf.Type ? 2 : field.resolvedType ? 0 : WIRE[field.type]!;
    if (field.map) {
      if (wire !== 2) throw new Refused(`field ${field.name}: wire type ${wire}`);
      const d = delimited(buf, pos, end);
      const [k, v] = mapEntry(buf, field as unknown as protobuf.MapField, d.start, d.end);
      const m = (set.get(field.name) as Record<string, unknown> | undefined) ?? {};
      m[k] = v;
      set.set(field.name, m);
      pos = d.end;
    } else if (field.repeated) {
      const list = (set.get(field.name) as unknown[] | undefined) ?? [];
      if (wire === 2 && elementWire !== 2) {
        const d = delimited(buf, pos, end);
        for (let at = d.start; at < d.end; ) {
          const v = element(buf, field, at, d.end);
          list.push(v.value);
          at = v.pos;
        }
        pos = d.end;
      } else {
        if (wire !== elementWire) throw new Refused(`field ${field.name}: wire type ${wire}`);
        const v = element(buf, field, pos, end);
        list.push(v.value);
        pos = v.pos;
      }
      set.set(field.name, list);
    } else {
      if (wire !== elementWire) throw new Refused(`field ${field.name}: wire type ${wire}`);
      const v = element(buf, field, pos, end);
      set.set(field.name, v.value);
      pos = v.pos;
    }
  }
  const out: Record<string, unknown> = {};
  for (const field of type.fieldsArray) {
    if (field.map && Object.values((set.get(field.name) as object | undefined) ?? {}).includes(ABSENT_MESSAGE)) {
      throw new Refused(`map ${field.name}: an entry without its message value (protobufjs toObject fails on it)`);
    }
    if (set.has(field.name)) {
      out[field.name] = set.get(field.name);
      if (field.partOf) out[field.partOf.name] = field.name;
    } else if (!field.partOf) out[field.name] = defaultOf(field);
  }
  return out;
}

type Result = { ok: true; value: unknown } | { ok: false; err: unknown };
function attempt(f: () => unknown): Result {
  try {
    return { ok: true, value: f() };
  } catch (err) {
    return { ok: false, err };
  }
}

// ---------------------------------------------------------------------------------------------
// 3. Random messages and their truncations
// ---------------------------------------------------------------------------------------------

const STRING_PIECES = ['a', 'Z', '0', '/', '-', '.', 'é', 'ß', '€', '中', '😀', 'spiffe://td/ns/a/sa/b', ' '];

class RandomMessages {
  constructor(readonly rand: () => number) {}
  int(n: number): number {
    return Math.floor(this.rand() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)]!;
  }
  string(): string {
    let s = '';
    for (let i = this.int(8); i > 0; i--) s += this.pick(STRING_PIECES);
    return s;
  }
  bytes(): Buffer {
    const b = Buffer.alloc(this.int(12));
    for (let i = 0; i < b.length; i++) b[i] = this.int(256);
    return b;
  }
  scalar(type: string): unknown {
    switch (type) {
      case 'string': return this.string();
      case 'bytes': return this.bytes();
      case 'bool': return this.rand() < 0.5;
      case 'double': return this.pick([0, -0, 1.5, -2.25e300, Number.MAX_VALUE, 3]);
      case 'float': return this.pick([0, 1.5, -2.25]);
      case 'int32': case 'sint32': case 'sfixed32': return this.pick([0, 1, -1, 127, 128, 300, 2 ** 31 - 1, -(2 ** 31)]);
      case 'uint32': case 'fixed32': return this.pick([0, 1, 127, 128, 2 ** 32 - 1]);
      case 'int64': case 'sint64': case 'sfixed64': return this.pick([0, 1, -1, 2 ** 28, 2 ** 35, -(2 ** 40), 2 ** 53 - 1]);
      default: return this.pick([0, 1, 2 ** 28, 2 ** 35, 2 ** 53 - 1]);
    }
  }
  /** A random object for `type`'s fromObject (Any values packing a real workload reference when `type` is Any). */
  message(type: protobuf.Type, depth = 0): Record<string, unknown> {
    if (type.fullName === '.google.protobuf.Any' && this.rand() < 0.7) {
      const url = this.pick(Object.keys(REFERENCE_TYPES));
      const info = REFERENCE_TYPES[url]!;
      const inner = loadProtos([info.proto]).root.lookupType(info.type);
      return { type_url: url, value: inner.encode(inner.fromObject(this.message(inner, depth + 1))).finish() };
    }
    const obj: Record<string, unknown> = {};
    const oneofDone = new Set<string>();
    for (const field of type.fieldsArray) {
      field.resolve();
      if (this.rand() < 0.35) continue;
      if (field.partOf) {
        if (oneofDone.has(field.partOf.name) || this.rand() < 0.5) continue;
        oneofDone.add(field.partOf.name);
      }
      const one = (): unknown => {
        const t = field.resolvedType;
        if (t instanceof protobuf.Type) return depth > 3 ? {} : this.message(t, depth + 1);
        if (t instanceof protobuf.Enum) return this.rand() < 0.9 ? this.pick(Object.keys(t.values)) : 17;
        return this.scalar(field.type);
      };
      if (field.map) {
        const m: Record<string, unknown> = {};
        for (let i = this.int(3); i > 0; i--) m[this.string()] = one();
        obj[field.name] = m;
      } else if (field.repeated) {
        obj[field.name] = Array.from({ length: this.int(4) }, one);
      } else obj[field.name] = one();
    }
    return obj;
  }
}

/** A length-delimited field whose payload is a message (its fields parsed), or any other field (raw). */
type Rec = { head: Buffer; raw: Buffer } | { head: Buffer; children: Rec[] } | { head: Buffer; payload: Buffer };

function encodeVarint(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

/** What a length-delimited field of number `n` in `type` holds: a message type (map entries included) or undefined. */
type Schema = (n: number) => Schema | undefined;
function schemaOf(type: protobuf.Type): Schema {
  return (n) => {
    const field = type.fieldsById[n];
    if (!field) return undefined;
    field.resolve();
    const valueSchema = field.resolvedType instanceof protobuf.Type ? schemaOf(field.resolvedType) : undefined;
    if (field.map) return (k) => (k === 2 ? valueSchema : undefined);
    return valueSchema;
  };
}

/** The fields of well-formed `buf` (throws on malformed bytes). */
function records(buf: Buffer, schema: Schema): Rec[] {
  const out: Rec[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const tag = varint(buf, pos, buf.length);
    const wire = Number(tag.value & 7n);
    const number = Number(tag.value >> 3n);
    const head = buf.subarray(pos, tag.pos);
    if (wire === 2) {
      const d = delimited(buf, tag.pos, buf.length);
      const payload = buf.subarray(d.start, d.end);
      const sub = schema(number);
      out.push(sub ? { head, children: records(payload, sub) } : { head, payload });
      pos = d.end;
    } else {
      const next = skipField(buf, wire, number, tag.pos, buf.length);
      out.push({ head, raw: buf.subarray(tag.pos, next) });
      pos = next;
    }
  }
  return out;
}

function serialize(recs: readonly Rec[]): Buffer {
  return Buffer.concat(
    recs.flatMap((r) => {
      if ('raw' in r) return [r.head, r.raw];
      const payload = 'children' in r ? serialize(r.children) : r.payload;
      return [r.head, encodeVarint(payload.length), payload];
    }),
  );
}

/** Every shortening of one length-delimited field, at any depth, with the enclosing lengths rewritten. */
function* shortenings(recs: readonly Rec[]): Generator<Rec[]> {
  for (let i = 0; i < recs.length; i++) {
    const r = recs[i]!;
    if ('raw' in r) continue;
    const with_ = (x: Rec): Rec[] => [...recs.slice(0, i), x, ...recs.slice(i + 1)];
    const payload = 'children' in r ? serialize(r.children) : r.payload;
    for (let n = 0; n < payload.length; n++) yield with_({ head: r.head, payload: payload.subarray(0, n) });
    if ('children' in r) for (const c of shortenings(r.children)) yield with_({ head: r.head, children: c });
  }
}

/** The bytes to try for a well-formed `buf`: each prefix, and each shortening of a nested field. */
function* truncations(buf: Buffer, type: protobuf.Type): Generator<Buffer> {
  for (let n = 0; n < buf.length; n++) yield buf.subarray(0, n);
  for (const recs of shortenings(records(buf, schemaOf(type)))) yield serialize(recs);
}

interface Subject {
  readonly label: string;
  readonly type: protobuf.Type;
  /** The decode under test (throws on refusal). */
  readonly decode: (bytes: Buffer) => unknown;
}

/** Every request and response deserializer of the grpc-js services of a proto set. */
function serviceSubjects(files: readonly string[]): Subject[] {
  const root = loadProtos(files).root;
  const definitions = servicesPackageDefinition(root) as Record<string, Record<string, MethodDefinition<unknown, unknown>>>;
  const out: Subject[] = [];
  for (const [service, methods] of Object.entries(definitions)) {
    for (const [name, method] of Object.entries(methods)) {
      const m = root.lookupService(service).methods[name]!;
      out.push({ label: `${service}/${name} request`, type: m.resolvedRequestType!, decode: method.requestDeserialize });
      out.push({ label: `${service}/${name} response`, type: m.resolvedResponseType!, decode: method.responseDeserialize });
    }
  }
  return out;
}

const require = createRequire(import.meta.url);
/** @grpc/reflection's own .proto files, for generating requests and for the reference. */
const REFLECTION_ROOT = (() => {
  const dir = join(dirname(require.resolve('@grpc/reflection')), '../proto/grpc/reflection');
  const root = new protobuf.Root().loadSync([join(dir, 'v1/reflection.proto'), join(dir, 'v1alpha/reflection.proto')]);
  root.resolveAll();
  return root;
})();

/** The request deserializers `addReflection` installs (v1 and v1alpha): strict, then the library's own. */
function reflectionSubjects(): Subject[] {
  const added: ServiceDefinition[] = [];
  addReflection({ addService: (definition: ServiceDefinition) => added.push(definition) } as unknown as Server, [HEALTH_PROTO]);
  assert.equal(added.length, 2, 'v1 and v1alpha');
  return added.flatMap((definition) =>
    Object.entries(definition).map(([name, method]) => {
      const service = method.path.split('/')[1]!;
      return { label: `${method.path} request`, type: REFLECTION_ROOT.lookupService(service).methods[name]!.resolvedRequestType!, decode: method.requestDeserialize };
    }),
  );
}

/** decodeStrict + toObject on a type (no service of ours carries it as a whole message). */
function typeSubject(files: readonly string[], name: string): Subject {
  const type = loadProtos(files).root.lookupType(name);
  return { label: name, type, decode: (bytes) => type.toObject(decodeStrict(type, bytes), MESSAGE_OBJECT_OPTIONS) };
}

const SUBJECTS: Subject[] = [
  ...serviceSubjects([BROKER_PROTO]),
  ...serviceSubjects([WORKLOAD_API_PROTO]),
  ...serviceSubjects([HEALTH_PROTO]),
  ...serviceSubjects([CA_PROTO]),
  ...reflectionSubjects(),
  typeSubject(RPC_STATUS_PROTOS, 'google.rpc.Status'),
  typeSubject(RPC_STATUS_PROTOS, 'google.rpc.ErrorInfo'),
  typeSubject([CA_PROTO], 'istio.v1.auth.IstioCertificateRequest'),
  ...Object.values(REFERENCE_TYPES).map((info) => typeSubject([info.proto], info.type)),
];

const MESSAGES_PER_TYPE = 25;

describe('deserializers against the strict reference: random valid messages and every truncation', () => {
  let refusedByReference = 0;
  let clampedByProtobufjs = 0;
  for (const subject of SUBJECTS) {
    it(subject.label, () => {
      const seed = 0x5eed + subject.label.length * 7919;
      const gen = new RandomMessages(seededRng(seed));
      const lenient = (bytes: Buffer) => subject.type.toObject(subject.type.decode(bytes), MESSAGE_OBJECT_OPTIONS);
      for (let i = 0; i < MESSAGES_PER_TYPE; i++) {
        const object = gen.message(subject.type);
        const bytes = Buffer.from(subject.type.encode(subject.type.fromObject(object)).finish());
        const context = `${subject.label}, seed ${seed}, message ${i}: ${bytes.toString('hex')}`;
        // Valid bytes: exactly protobufjs's own reading, and the reference's.
        const ours = subject.decode(bytes);
        assert.deepStrictEqual(ours, lenient(bytes), `${context}: same as protobufjs`);
        assert.deepStrictEqual(ours, reference(subject.type, bytes), `${context}: same as the reference`);
        for (const cut of truncations(bytes, subject.type)) {
          const want = attempt(() => reference(subject.type, cut));
          const got = attempt(() => subject.decode(cut));
          const what = `${context}; truncated to ${cut.toString('hex')}`;
          if (!want.ok) {
            assert.ok(want.err instanceof Refused, `${what}: reference failed with ${String(want.err)}`);
            refusedByReference++;
            assert.equal(got.ok, false, `${what}: the reference refuses (${(want.err as Error).message}), the deserializer gave ${JSON.stringify(got.ok && got.value)}`);
            if (attempt(() => lenient(cut)).ok) clampedByProtobufjs++;
          } else {
            assert.ok(got.ok, `${what}: the reference reads it, the deserializer refused: ${String(!got.ok && got.err)}`);
            assert.deepStrictEqual(got.value, want.value, what);
          }
        }
      }
    });
  }
  it('the truncations include ones protobufjs alone would have read (the test has teeth)', () => {
    assert.ok(refusedByReference > 1000, `refused: ${refusedByReference}`);
    assert.ok(clampedByProtobufjs > 100, `read by plain protobufjs though truncated: ${clampedByProtobufjs}`);
  });
});

/** The request deserializers @grpc/reflection itself installs (proto-loader's: `toObject(decode(bytes), its options)`), by method path. */
function libraryReflectionDeserializers(): Map<string, (bytes: Buffer) => unknown> {
  const out = new Map<string, (bytes: Buffer) => unknown>();
  const capture = { addService: (definition: ServiceDefinition) => Object.values(definition).forEach((m) => out.set(m.path, m.requestDeserialize)) };
  new ReflectionService({}).addToServer(capture as unknown as Server);
  return out;
}

describe('reflection requests: decoded once, strictly, into the object @grpc/reflection builds', () => {
  const library = libraryReflectionDeserializers();
  for (const subject of reflectionSubjects()) {
    it(subject.label, () => {
      const theirs = library.get(subject.label.replace(/ request$/u, ''))!;
      assert.ok(theirs, subject.label);
      const gen = new RandomMessages(seededRng(0x7ef1 + subject.label.length));
      const samples = [Buffer.alloc(0), ...Array.from({ length: 200 }, () => Buffer.from(subject.type.encode(subject.type.fromObject(gen.message(subject.type))).finish()))];
      for (const bytes of samples) assert.deepStrictEqual(subject.decode(bytes), theirs(bytes), bytes.toString('hex'));
    });
  }
});

describe('other strict call sites', () => {
  it('parseReference: every truncation of a packed KubernetesObjectReference is a "does not decode" refusal or reads as the reference says', () => {
    const gen = new RandomMessages(seededRng(77));
    for (const [url, info] of Object.entries(REFERENCE_TYPES)) {
      if (info.kind !== 'kubernetes') continue;
      const type = loadProtos([info.proto]).root.lookupType(info.type);
      for (let i = 0; i < 30; i++) {
        const uid = `${gen.bytes().toString('hex').padEnd(8, '0').slice(0, 8)}-0000-4000-8000-000000000000`;
        const value = Buffer.from(type.encode(type.fromObject({ type: { plural: 'pods', group: 'core' }, key: { namespace: 'shop', name: `cart-${i}` }, uid })).finish());
        for (const cut of truncations(value, type)) {
          const want = attempt(() => reference(type, cut));
          const got = attempt(() => parseReference({ type_url: url, value: cut }));
          const undecodable = !got.ok && /does not decode/.test((got.err as Error).message);
          assert.equal(undecodable, !want.ok, `${url} ${cut.toString('hex')}: ${got.ok ? JSON.stringify(got.value) : (got.err as Error).message}`);
          if (want.ok && got.ok) {
            const r = want.value as { uid: string; key: { namespace: string; name: string } | null };
            assert.equal((got.value as { uid?: string }).uid, r.uid === '' ? undefined : r.uid);
          }
        }
      }
    }
  });

  it('the brief\'s case: a uid declared 37 bytes with the 36 of a real UUID present no longer reads as that UUID', () => {
    const uid = '0b5e2a4c-7f3d-4c1e-9a8b-1234567890ab';
    const value = Buffer.concat([hex('0a 0c 0a 04'), Buffer.from('pods'), hex('12 04'), Buffer.from('core'), hex('1a 25'), Buffer.from(uid)]);
    const type = loadProtos([BROKER_PROTO]).root.lookupType('spiffe.broker.KubernetesObjectReference');
    assert.equal((type.toObject(type.decode(value)) as { uid: string }).uid, uid, 'protobufjs alone reads the UUID');
    const url = Object.keys(REFERENCE_TYPES).find((u) => REFERENCE_TYPES[u]!.type === 'spiffe.broker.KubernetesObjectReference')!;
    assert.throws(() => parseReference({ type_url: url, value }), (e: Error & { code?: string }) => e.code === 'ERR_REQUEST_MALFORMED' && /does not decode/.test(e.message));
  });

  it('decodeRpcStatus refuses a truncated google.rpc.Status and a truncated ErrorInfo inside it', () => {
    const Info = loadProtos(RPC_STATUS_PROTOS).root.lookupType('google.rpc.ErrorInfo');
    const Status = loadProtos(RPC_STATUS_PROTOS).root.lookupType('google.rpc.Status');
    const info = Buffer.concat([hex('0a 7f'), Buffer.from('REASON')]); // reason declared 127 bytes, 6 present
    const status = Status.encode(Status.fromObject({ code: 3, message: 'm', details: [{ type_url: 'type.googleapis.com/google.rpc.ErrorInfo', value: info }] })).finish();
    assert.equal((Info.toObject(Info.decode(info)) as { reason: string }).reason, 'REASON', 'protobufjs alone clamps');
    assert.throws(() => decodeRpcStatus(status), RangeError);
    assert.throws(() => decodeRpcStatus(Buffer.concat([hex('08 03 12 7f'), Buffer.from('msg')])), RangeError);
  });
});
