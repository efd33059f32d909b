/**
 * h2/hpack on bad and hostile input: the Huffman code derived from its lengths (known codes, a
 * complete prefix code), each malformed representation refused with HpackError, the header list
 * limit (fields stop, the table stays in sync), and a seeded fuzz loop of random and mutated
 * blocks that may only return or throw HpackError.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HpackDecoder, HpackError, encodeHeaderBlock, type HeaderField } from '../../src/h2/hpack.js';
import { HUFFMAN_CODES, HUFFMAN_CODE_LENGTHS, HUFFMAN_EOS, STATIC_TABLE } from '../../src/h2/hpack-tables.js';
import { seededRng } from '../support/seeded-rng.js';

const decoder = (maxHeaderListSize = 65536) => new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize });
function fields(d: HpackDecoder, block: readonly number[]): HeaderField[] {
  const out: HeaderField[] = [];
  d.decode(Buffer.from(block), (n, v) => out.push([n, v]));
  return out;
}

test('the derived Huffman codes: known values, and a complete prefix code (Kraft sum exactly 1)', () => {
  const code = (c: string | number) => {
    const s = typeof c === 'number' ? c : c.charCodeAt(0);
    return [HUFFMAN_CODES[s], HUFFMAN_CODE_LENGTHS[s]];
  };
  assert.deepEqual(code('0'), [0x0, 5]);
  assert.deepEqual(code('a'), [0x3, 5]);
  assert.deepEqual(code(' '), [0x14, 6]);
  assert.deepEqual(code(':'), [0x5c, 7]);
  assert.deepEqual(code(0), [0x1ff8, 13]);
  assert.deepEqual(code(255), [0x3ffffee, 26]);
  assert.deepEqual(code(HUFFMAN_EOS), [0x3fffffff, 30]);
  assert.equal(HUFFMAN_CODE_LENGTHS.length, 257);
  assert.equal(HUFFMAN_CODE_LENGTHS.reduce((sum, l) => sum + 2 ** -l, 0), 1);
  assert.equal(STATIC_TABLE.length, 61);
  assert.deepEqual(STATIC_TABLE[60], ['www-authenticate', '']);
});

const MALFORMED: Array<[string, number[]]> = [
  ['indexed field with index 0', [0x80]],
  ['index beyond the static table with an empty dynamic table', [0xbe]],
  ['integer truncated after its prefix', [0xff]],
  ['integer truncated in its continuation', [0xff, 0x80]],
  ['integer above 2^31 - 1', [0xff, 0xff, 0xff, 0xff, 0xff, 0x0f]],
  ['integer with too many continuation octets', [0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00]],
  ['literal name missing', [0x40]],
  ['literal value missing', [0x44]],
  ['string longer than the block', [0x40, 0x05, 0x61]],
  ['Huffman string containing EOS', [0x00, 0x01, 0x61, 0x84, 0xff, 0xff, 0xff, 0xff]],
  ['Huffman padding of 8 bits', [0x00, 0x01, 0x61, 0x81, 0xff]],
  ['Huffman padding not all ones', [0x00, 0x01, 0x61, 0x81, 0x00]],
  ['table size update above the advertised 4096', [0x3f, 0xe2, 0x1f]],
  ['table size update after a field', [0x82, 0x20]],
];

for (const [what, block] of MALFORMED) {
  test(`refused with HpackError: ${what}`, () => {
    assert.throws(() => fields(decoder(), block), (err: unknown) => err instanceof HpackError && err.code === 'ERR_H2_HPACK' && err.message.length > 10);
  });
}

test('accepted: size updates at the start of a block (several, up to the limit), an empty block', () => {
  const d = decoder();
  assert.deepEqual(fields(d, [0x20, 0x3f, 0xe1, 0x1f, 0x82]), [[':method', 'GET']]);
  assert.deepEqual(fields(d, []), []);
  assert.deepEqual(fields(d, [0x00, 0x00, 0x00]), [['', '']], 'empty name and value are HPACK-valid (HTTP rules are the caller\'s)');
  assert.deepEqual(fields(d, [0x00, 0x01, 0x61, 0x81, 0x1f]), [['a', 'a']], 'Huffman "a" padded with 3 one-bits');
});

test('a header list over maxHeaderListSize: decode returns false, stops delivering, keeps the table in sync', () => {
  const d = decoder(100);
  // Two fields of 1 + 40 + 32 = 73 each, both with incremental indexing.
  const big = (c: string) => [0x40, 0x01, c.charCodeAt(0), 0x28, ...Buffer.from(c.repeat(40))];
  const got: HeaderField[] = [];
  assert.equal(d.decode(Buffer.from([...big('a'), ...big('b')]), (n, v) => got.push([n, v])), false);
  assert.deepEqual(got, [['a', 'a'.repeat(40)]]);
  const next: HeaderField[] = [];
  assert.equal(d.decode(Buffer.from([0xbe]), (n, v) => next.push([n, v])), true);
  assert.deepEqual(next, [['b', 'b'.repeat(40)]], 'the undelivered field is still the newest table entry');
});

test('a size update to 0 empties the table: the entry indexed before is gone in the next block', () => {
  const d = decoder();
  assert.deepEqual(fields(d, [0x41, 0x01, 0x61, 0xbe]), [[':authority', 'a'], [':authority', 'a']]);
  assert.throws(() => fields(d, [0x20, 0xbe]), HpackError);
});

test('long Huffman strings remembered per decoder: equal octets give the same text, one octet changed does not', () => {
  const d = decoder();
  const value = (text: string) => encodeHeaderBlock([['x-token', text]]);
  const a = 'Bearer ' + 'abcdefghij'.repeat(5);
  const b = 'Bearer ' + 'abcdefghij'.repeat(4) + 'abcdefghik';
  const blockA = value(a);
  const blockB = value(b);
  assert.equal(blockA.length, blockB.length, 'same octet count: only the content tells them apart');
  const got: string[] = [];
  for (const block of [blockA, blockB, blockA, blockB, value('Bearer ' + 'z'.repeat(50)), blockA]) {
    d.decode(block, (_, v) => got.push(v));
  }
  assert.deepEqual(got, [a, b, a, b, 'Bearer ' + 'z'.repeat(50), a]);
  const bad = Buffer.from(blockA);
  bad[bad.length - 1] = 0x00;
  assert.throws(() => d.decode(bad, () => undefined), HpackError, 'a changed last octet is decoded (and refused), not taken from memory');
});

test('decoder options are checked', () => {
  assert.throws(() => new HpackDecoder({ maxTableSize: -1, maxHeaderListSize: 1 }), HpackError);
  assert.throws(() => new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: Number.NaN }), HpackError);
});

test('fuzz: random and mutated blocks only decode or throw HpackError', () => {
  const seed = 20261203;
  const rng = seededRng(seed);
  const valid = encodeHeaderBlock([[':status', '200'], ['content-type', 'application/grpc'], ['x-a', 'Bearer abc.def'], ['grpc-message', 'x'.repeat(40)]]);
  const seeds = [valid, Buffer.from('8286844188f1e3c2e5f23a6ba0ab90f4ff5886a8eb10649cbf4088' + '25a849e95ba97d7f8925a849e95bb8e8b4bf', 'hex')];
  let ok = 0;
  let refused = 0;
  for (let i = 0; i < 20000; i++) {
    let block: Buffer;
    if (i % 2 === 0) {
      block = Buffer.from(Array.from({ length: Math.floor(rng() * 64) }, () => Math.floor(rng() * 256)));
    } else {
      block = Buffer.from(seeds[i % seeds.length]!);
      for (let m = 0; m < 1 + Math.floor(rng() * 4); m++) block[Math.floor(rng() * block.length)] = Math.floor(rng() * 256);
      block = block.subarray(0, Math.floor(rng() * (block.length + 1)));
    }
    const d = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 1 + Math.floor(rng() * 300) });
    try {
      d.decode(block, (n, v) => assert.ok(typeof n === 'string' && typeof v === 'string'));
      ok++;
    } catch (err) {
      assert.ok(err instanceof HpackError, `seed ${seed} iteration ${i} block ${block.toString('hex')}: ${String(err)}`);
      refused++;
    }
  }
  assert.ok(ok > 1000 && refused > 1000, `both outcomes exercised: ${ok} decoded, ${refused} refused`);
});
