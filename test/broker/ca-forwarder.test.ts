/**
 * The request the Istio CA front forwards (`forwardRequestBytes`, written by hand) decodes, with
 * protobufjs over the CA's own .proto and the CA transport's options, to exactly the request the
 * grpc-js client sent before: the CSR, validity_duration (absent when 0), and the Struct with
 * ImpersonatedIdentity — for CSRs and identities whose lengths need 1-, 2- and 3-byte varints.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { createSecureServer, type Http2SecureServer, type Http2Session } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it, test } from 'node:test';
import { CaForwarder, forwardRequestBytes } from '../../src/broker/index.js';
import { Secret } from '../../src/core/secret.js';
import { frame, protobufRoot, stringStruct, structString } from '../../src/grpc/index.js';
import { caKeyMaterial, createCsr, createRootCa, FastLeafIssuer, generateKeyPair } from '../../src/pki/index.js';
import { silentTlsMaterial } from '../support/hung-server.js';

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

/**
 * `CaForwarder.forwardCsr` against a real TLS node:http2 server shaped as the CA answers (the
 * message, then the status in trailers): the answer is decoded and checked as soon as the message
 * is in (`H2UnaryChannel`'s `early`), and that outcome counts only with an OK status — a refusal
 * after a message is the refusal, whatever the message held.
 */
describe('CaForwarder over the wire', () => {
  const ID = 'spiffe://cluster.local/ns/shop/sa/cart';
  const Res = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateResponse');
  let server: Http2SecureServer;
  let forwarder: CaForwarder;
  const sessions: Http2Session[] = [];
  /** The next answer: its message and the status in the trailers after it. */
  let next: { readonly message: Buffer; readonly status: number } = { message: Buffer.alloc(0), status: 0 };
  let good: string[];
  let otherSan: string[];
  let csr: string;

  before(async () => {
    const root = await createRootCa({ subject: 'CN=root', ttlSeconds: 86400 });
    const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
    csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: ID }).pem;
    good = [(await issuer.issueAsync({ csr, spiffeId: ID, ttlSeconds: 3600 })).pem, root.pem];
    otherSan = [(await issuer.issueAsync({ csr, spiffeId: 'spiffe://cluster.local/ns/shop/sa/web', ttlSeconds: 3600 })).pem, root.pem];
    const tls = await silentTlsMaterial();
    server = createSecureServer({ cert: tls.certPem, key: tls.keyPem, allowHTTP1: false });
    server.on('session', (s) => sessions.push(s));
    server.on('stream', (stream) => {
      stream.resume();
      stream.once('end', () => {
        const { message, status } = next;
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': String(status), 'grpc-message': status === 0 ? '' : 'refused' }));
        stream.end(frame(message));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    forwarder = new CaForwarder({
      address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
      caRootsPem: tls.caCertPem,
      tlsServerName: 'localhost',
      tokens: { token: async () => new Secret('broker-token') },
      clusterId: 'Kubernetes',
    });
  });

  after(async () => {
    forwarder.close();
    for (const s of sessions) s.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const answer = (chain: readonly string[]) => Buffer.from(Res.encode({ cert_chain: chain }).finish());
  const forward = () => forwarder.forwardCsr({ csrPem: csr, identity: ID, ttlSeconds: 3600 }, new AbortController().signal);
  const refusal = async (): Promise<string | undefined> => {
    try {
      await forward();
      return 'accepted';
    } catch (err) {
      return (err as { grpcCode?: string; code?: string }).grpcCode ?? (err as { code?: string }).code;
    }
  };

  it('an OK answer is checked: the chain comes back with its leaf key; another SAN and a non-protobuf message are refused', async () => {
    next = { message: answer(good), status: 0 };
    const ok = await forward();
    assert.deepEqual(ok.certChain, good);
    assert.ok(ok.leafSpki.equals(new X509Certificate(good[0]!).publicKey.export({ type: 'spki', format: 'der' })));
    next = { message: answer(otherSan), status: 0 };
    assert.equal(await refusal(), 'ERR_CA_SAN_MISMATCH');
    next = { message: Buffer.from([0xff, 0xff, 0xff]), status: 0 };
    assert.equal(await refusal(), 'INTERNAL');
  });

  it("a status other than OK after the message is the CA's refusal, whether the message passed the check or not", async () => {
    next = { message: answer(good), status: 16 };
    assert.equal(await refusal(), 'UNAUTHENTICATED');
    next = { message: answer(otherSan), status: 3 };
    assert.equal(await refusal(), 'INVALID_ARGUMENT');
  });
});
