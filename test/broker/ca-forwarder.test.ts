/**
 * The request the Istio CA front forwards (`forwardRequestBytes`, written by hand) decodes, with
 * protobufjs over the CA's own .proto and the CA transport's options, to exactly the request the
 * grpc-js client sent before: the CSR, validity_duration (absent when 0), and the Struct with
 * ImpersonatedIdentity — for CSRs and identities whose lengths need 1-, 2- and 3-byte varints.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { forwardRequestBytes } from '../../src/broker/index.js';
import { protobufRoot, stringStruct, structString } from '../../src/grpc/index.js';

const Req = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateRequest');

test('forwardRequestBytes decodes to the CSR, the TTL and ImpersonatedIdentity, and matches protobufjs byte for byte (but an omitted 0 TTL)', () => {
  const cases = [
    { csrPem: 'x', identity: 'spiffe://td/ns/a/sa/b', ttlSeconds: 86_400 },
    { csrPem: '-----BEGIN CERTIFICATE REQUEST-----\n' + 'A'.repeat(700) + '\n-----END CERTIFICATE REQUEST-----\n', identity: `spiffe://cluster.local/ns/${'n'.repeat(63)}/sa/${'s'.repeat(200)}`, ttlSeconds: 0 },
    { csrPem: 'é'.repeat(20_000), identity: 'spiffe://td/ns/ü/sa/b', ttlSeconds: 2 ** 40 },
  ];
  for (const c of cases) {
    const bytes = forwardRequestBytes(c);
    const decoded = Req.toObject(Req.decode(bytes), { longs: Number, defaults: true, oneofs: true }) as { csr: string; validity_duration: number; metadata: Parameters<typeof structString>[0] };
    assert.equal(decoded.csr, c.csrPem);
    assert.equal(decoded.validity_duration, c.ttlSeconds);
    assert.equal(structString(decoded.metadata, 'ImpersonatedIdentity'), c.identity);
    const reference = Req.encode(Req.fromObject({ csr: c.csrPem, validity_duration: c.ttlSeconds, metadata: stringStruct({ ImpersonatedIdentity: c.identity }) })).finish();
    // protobufjs writes a 0 TTL explicitly (it decodes the same); otherwise the bytes are equal.
    if (c.ttlSeconds > 0) assert.deepEqual(bytes, Buffer.from(reference));
    else assert.equal(bytes.length, reference.length - 2);
  }
});
