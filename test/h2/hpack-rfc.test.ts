/**
 * h2/hpack against RFC 7541 Appendix C: the byte strings of C.2-C.6 (typed from the RFC's
 * examples), decoded field by field, with the dynamic table's size and entries after each block
 * (C.5 and C.6 use a 256-octet table, so entries are evicted); the Huffman-coded strings of C.4 and
 * C.6 re-encoded to the same bytes by our encoder.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HpackDecoder, encodeHeaderBlock, type HeaderField } from '../../src/h2/hpack.js';
import { huffmanEncodeInto, huffmanLength } from '../../src/h2/hpack-huffman.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/gu, ''), 'hex');

function decodeAll(d: HpackDecoder, block: Buffer): HeaderField[] {
  const out: HeaderField[] = [];
  assert.equal(d.decode(block, (n, v) => out.push([n, v])), true);
  return out;
}

/** The dynamic table as [name, value] newest first, read back through indexed fields 62... */
function tableOf(d: HpackDecoder, entries: number): HeaderField[] {
  const out: HeaderField[] = [];
  for (let i = 0; i < entries; i++) decodeAll(d, Buffer.from([0x80 | (62 + i)])).forEach((f) => out.push(f));
  assert.throws(() => decodeAll(d, Buffer.from([0x80 | (62 + entries)])), { code: 'ERR_H2_HPACK' }, 'no entry past the last');
  return out;
}

const tableSize = (fields: readonly HeaderField[]) => fields.reduce((n, [a, b]) => n + a.length + b.length + 32, 0);

test('C.2: the four representations, one block each', () => {
  const d = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 65536 });
  assert.deepEqual(decodeAll(d, hex('400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572')), [['custom-key', 'custom-header']]);
  assert.deepEqual(tableOf(d, 1), [['custom-key', 'custom-header']]);
  const fresh = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 65536 });
  assert.deepEqual(decodeAll(fresh, hex('040c 2f73 616d 706c 652f 7061 7468')), [[':path', '/sample/path']]);
  assert.deepEqual(decodeAll(fresh, hex('1008 7061 7373 776f 7264 0673 6563 7265 74')), [['password', 'secret']]);
  assert.deepEqual(decodeAll(fresh, hex('82')), [[':method', 'GET']]);
  assert.deepEqual(tableOf(fresh, 0), [], 'literals without indexing and indexed fields add nothing');
});

const REQ1: HeaderField[] = [[':method', 'GET'], [':scheme', 'http'], [':path', '/'], [':authority', 'www.example.com']];
const REQ2: HeaderField[] = [...REQ1, ['cache-control', 'no-cache']];
const REQ3: HeaderField[] = [[':method', 'GET'], [':scheme', 'https'], [':path', '/index.html'], [':authority', 'www.example.com'], ['custom-key', 'custom-value']];
const REQ_TABLES: HeaderField[][] = [
  [[':authority', 'www.example.com']],
  [['cache-control', 'no-cache'], [':authority', 'www.example.com']],
  [['custom-key', 'custom-value'], ['cache-control', 'no-cache'], [':authority', 'www.example.com']],
];

function requests(blocks: readonly string[]): void {
  const d = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 65536 });
  [REQ1, REQ2, REQ3].forEach((want, i) => {
    assert.deepEqual(decodeAll(d, hex(blocks[i]!)), want, `request ${i + 1}`);
    const table = tableOf(d, REQ_TABLES[i]!.length);
    assert.deepEqual(table, REQ_TABLES[i]);
    assert.equal(tableSize(table), [57, 110, 164][i]);
  });
}

test('C.3: three requests without Huffman coding share one dynamic table', () => {
  requests([
    '8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d',
    '8286 84be 5808 6e6f 2d63 6163 6865',
    '8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65',
  ]);
});

test('C.4: the same three requests, Huffman-coded', () => {
  requests([
    '8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff',
    '8286 84be 5886 a8eb 1064 9cbf',
    '8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf',
  ]);
});

const DATE1 = 'Mon, 21 Oct 2013 20:13:21 GMT';
const DATE2 = 'Mon, 21 Oct 2013 20:13:22 GMT';
const LOC = 'https://www.example.com';
const COOKIE = 'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1';
const RESP: HeaderField[][] = [
  [[':status', '302'], ['cache-control', 'private'], ['date', DATE1], ['location', LOC]],
  [[':status', '307'], ['cache-control', 'private'], ['date', DATE1], ['location', LOC]],
  [[':status', '200'], ['cache-control', 'private'], ['date', DATE2], ['location', LOC], ['content-encoding', 'gzip'], ['set-cookie', COOKIE]],
];
const RESP_TABLES: HeaderField[][] = [
  [['location', LOC], ['date', DATE1], ['cache-control', 'private'], [':status', '302']],
  [[':status', '307'], ['location', LOC], ['date', DATE1], ['cache-control', 'private']],
  [['set-cookie', COOKIE], ['content-encoding', 'gzip'], ['date', DATE2]],
];

function responses(blocks: readonly string[]): void {
  const d = new HpackDecoder({ maxTableSize: 256, maxHeaderListSize: 65536 });
  RESP.forEach((want, i) => {
    assert.deepEqual(decodeAll(d, hex(blocks[i]!)), want, `response ${i + 1}`);
    const table = tableOf(d, RESP_TABLES[i]!.length);
    assert.deepEqual(table, RESP_TABLES[i]);
    assert.equal(tableSize(table), [222, 222, 215][i]);
  });
}

test('C.5: three responses without Huffman coding, 256-octet table: entries are evicted', () => {
  responses([
    `4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
     2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d`,
    '4803 3330 37c1 c0bf',
    `88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
     54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
     5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31`,
  ]);
});

test('C.6: the same three responses, Huffman-coded', () => {
  responses([
    `4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
     2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3`,
    '4883 640e ffc1 c0bf',
    `88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
     77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
     9587 3160 65c0 03ed 4ee5 b106 3d50 07`,
  ]);
});

test('the Huffman encoder writes the RFC strings of C.4 and C.6 byte for byte', () => {
  const cases: Array<[string, string]> = [
    ['www.example.com', 'f1e3 c2e5 f23a 6ba0 ab90 f4ff'],
    ['no-cache', 'a8eb 1064 9cbf'],
    ['custom-key', '25a8 49e9 5ba9 7d7f'],
    ['custom-value', '25a8 49e9 5bb8 e8b4 bf'],
    ['302', '6402'],
    ['private', 'aec3 771a 4b'],
    [DATE1, 'd07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff'],
    [LOC, '9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3'],
  ];
  for (const [text, bytes] of cases) {
    const want = hex(bytes);
    assert.equal(huffmanLength(text), want.length, text);
    const out = Buffer.alloc(want.length);
    assert.equal(huffmanEncodeInto(text, out, 0), want.length, text);
    assert.deepEqual(out, want, text);
  }
});

test('the encoder: static matches are indexed, other fields literal without indexing, decodable by our decoder', () => {
  assert.deepEqual(encodeHeaderBlock([[':status', '200']]), hex('88'));
  // content-type is static entry 31: a literal without indexing whose 4-bit name index prefix is full (0x0f, then 16).
  const fields: HeaderField[] = [[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', '0'], ['grpc-message', 'a%20b'], ['x-odd', '\u00ff\u0001\t']];
  const block = encodeHeaderBlock(fields);
  assert.equal(block[1], 0x0f, 'content-type: literal, 4-bit prefix full');
  assert.equal(block[2], 31 - 15, 'content-type: the rest of index 31');
  const d = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 65536 });
  assert.deepEqual(decodeAll(d, block), fields);
  assert.deepEqual(tableOf(d, 0), [], 'nothing inserted into the peer table');
  assert.throws(() => encodeHeaderBlock([['x', '\u0100']]), { code: 'ERR_H2_HPACK' });
});
