import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeLength, encodeOid, encodeTime, positiveIntegerContent, readTlv, tlv } from '../../src/pki/der.js';
import { PkiError } from '../../src/pki/index.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function derCode(bytes: number[]): string {
  try {
    readTlv(Buffer.from(bytes), 0);
    return 'ok';
  } catch (err) {
    assert.ok(err instanceof PkiError);
    return err.code;
  }
}

test('readTlv accepts minimal definite lengths and rejects everything else', () => {
  assert.deepEqual(readTlv(Buffer.from([0x30, 0x02, 0x05, 0x00]), 0), { tag: 0x30, start: 0, contentStart: 2, end: 4 });
  const long = Buffer.concat([Buffer.from([0x04, 0x81, 0x80]), Buffer.alloc(0x80)]);
  assert.equal(readTlv(long, 0).end, long.length);
  const longer = Buffer.concat([Buffer.from([0x04, 0x82, 0x01, 0x00]), Buffer.alloc(0x100)]);
  assert.equal(readTlv(longer, 0).contentStart, 4);
  assert.equal(derCode([0x30]), 'ERR_PKI_DER_INVALID'); // truncated header
  assert.equal(derCode([0x30, 0x80, 0x00, 0x00]), 'ERR_PKI_DER_INVALID'); // indefinite
  assert.equal(derCode([0x30, 0x81, 0x05, 1, 2, 3, 4, 5]), 'ERR_PKI_DER_INVALID'); // non-minimal (short form fits)
  assert.equal(derCode([0x30, 0x82, 0x00, 0x80, ...new Array(0x80).fill(0)]), 'ERR_PKI_DER_INVALID'); // leading zero
  assert.equal(derCode([0x30, 0x85, 1, 1, 1, 1, 1]), 'ERR_PKI_DER_INVALID'); // 5 length octets
  assert.equal(derCode([0x30, 0x05, 1, 2]), 'ERR_PKI_DER_INVALID'); // runs past the buffer
  assert.equal(derCode([0x1f, 0x81, 0x01, 0x00]), 'ERR_PKI_DER_INVALID'); // high tag number
  assert.equal(derCode([0x30, 0x82, 0x01]), 'ERR_PKI_DER_INVALID'); // truncated length
  // A child must stay inside its parent's limit.
  assert.throws(() => readTlv(Buffer.from([0x30, 0x03, 0x04, 0x02, 0x00, 0x00]), 2, 5), (e: unknown) => e instanceof PkiError);
});

test('writers: lengths, OIDs, positive integers, RFC 5280 times', () => {
  assert.equal(hex(encodeLength(0x7f)), '7f');
  assert.equal(hex(encodeLength(0x80)), '8180');
  assert.equal(hex(encodeLength(0x1234)), '821234');
  assert.equal(hex(tlv(0x04, Buffer.from([1]), Buffer.from([2, 3]))), '0403010203');
  assert.equal(hex(encodeOid('1.2.840.10045.4.3.2')), '06082a8648ce3d040302');
  assert.equal(hex(encodeOid('2.5.29.17')), '0603551d11');
  assert.equal(hex(positiveIntegerContent(Buffer.from([0x00, 0x00, 0x7f]))), '7f');
  assert.equal(hex(positiveIntegerContent(Buffer.from([0x80]))), '0080');
  assert.equal(hex(positiveIntegerContent(Buffer.from([0x00, 0x00]))), '00');
  assert.equal(encodeTime(Date.UTC(2026, 10, 29, 7, 8, 9, 999)).subarray(2).toString(), '261129070809Z');
  assert.equal(encodeTime(Date.UTC(2049, 11, 31, 23, 59, 59))[0], 0x17);
  assert.equal(encodeTime(Date.UTC(2050, 0, 1, 0, 0, 0)).subarray(2).toString(), '20500101000000Z');
  assert.equal(encodeTime(Date.UTC(2050, 0, 1))[0], 0x18);
  assert.equal(encodeTime(Date.UTC(1950, 0, 1))[0], 0x17);
  assert.equal(encodeTime(Date.UTC(1949, 11, 31)).subarray(2).toString(), '19491231000000Z');
});
