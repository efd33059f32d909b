/**
 * The http2 transport writes IstioCertificateResponse frames by hand (certChainFrame); they
 * must decode, with protobufjs over our own .proto, to exactly the chain given — including
 * lengths that need 1-, 2- and 3-byte varints and non-ASCII text. And the grpc-timeout header
 * it reads.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { certChainFrame } from '../../src/ca/index.js';
import { grpcTimeoutHeader, grpcTimeoutMs, parseGrpcMessage, grpcMessage, protobufRoot } from '../../src/grpc/index.js';

const Res = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateResponse');

function decode(frame: Buffer): string[] {
  assert.equal(frame[0], 0, 'uncompressed flag');
  assert.equal(frame.readUInt32BE(1), frame.length - 5, 'length prefix');
  return (Res.toObject(Res.decode(frame.subarray(5)), { arrays: true }) as { cert_chain: string[] }).cert_chain;
}

test('certChainFrame decodes to the same chain (varint sizes 1-3 bytes, empty, unicode)', () => {
  const cases: string[][] = [
    [],
    [''],
    ['a'],
    ['x'.repeat(127), 'y'.repeat(128)],
    ['-----BEGIN CERTIFICATE-----\n' + 'A'.repeat(900) + '\n-----END CERTIFICATE-----\n', 'z'.repeat(16_383), 'w'.repeat(16_384)],
    ['é✓ unicode 🙂', 'b'.repeat(70_000)],
  ];
  for (const chain of cases) assert.deepEqual(decode(certChainFrame(chain)), chain);
});

test('certChainFrame is byte-identical to protobufjs encoding', () => {
  const chain = ['leaf'.repeat(300), 'intermediate'.repeat(50), 'root'.repeat(200)];
  const reference = Res.encode(Res.fromObject({ cert_chain: chain })).finish();
  assert.deepEqual(certChainFrame(chain).subarray(5), Buffer.from(reference));
});

test('grpcTimeoutMs reads the gRPC timeout units and refuses anything else', () => {
  assert.equal(grpcTimeoutMs('2H'), 7_200_000);
  assert.equal(grpcTimeoutMs('3M'), 180_000);
  assert.equal(grpcTimeoutMs('5S'), 5000);
  assert.equal(grpcTimeoutMs('250m'), 250);
  assert.equal(grpcTimeoutMs('1500u'), 1.5);
  assert.equal(grpcTimeoutMs('2000000n'), 2);
  assert.equal(grpcTimeoutMs('99999999S'), undefined, 'beyond a timer');
  for (const bad of [undefined, '', 'S', '5', '5s', '-5S', '123456789S', '1.5S', ' 5S', ['5S']]) assert.equal(grpcTimeoutMs(bad), undefined, String(bad));
});

test('grpcTimeoutHeader writes what grpcTimeoutMs reads back (rounded up to whole ms); grpc-message round-trips', () => {
  for (const ms of [0, 1, 0.2, 250, 10_000, 99_999_999]) assert.equal(grpcTimeoutMs(grpcTimeoutHeader(ms)), Math.ceil(ms), String(ms));
  assert.equal(grpcTimeoutHeader(1e9), '1000000S');
  for (const text of ['plain', '100% sure', 'naïve — ü', 'line\nbreak']) assert.equal(parseGrpcMessage(grpcMessage(text)), text);
  assert.equal(parseGrpcMessage('bad %zz escape'), 'bad %zz escape');
  assert.equal(parseGrpcMessage(undefined), '');
});
