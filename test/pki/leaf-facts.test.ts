/**
 * `leafFacts` (the DER reader a relay checks leaves with) against node's X509Certificate for the
 * same certificates: URI SANs, CA flag, SPKI; `verifyLeafSignature` with the signer's key and with
 * another; garbage is ERR_PKI_CERT_INVALID.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import {
  caKeyMaterial,
  createCsr,
  createIntermediateCa,
  createRootCa,
  FastLeafIssuer,
  generateKeyPair,
  leafFacts,
  verifyLeafSignature,
  type KeySpec,
} from '../../src/pki/index.js';
import { uriSans } from '../../src/pki/x509-fields.js';
import { basicConstraintsOf, type BasicConstraints } from '../../src/pki/leaf-facts.js';
import { PkiError } from '../../src/pki/errors.js';
import { OpensslCerts, type OpensslCert } from '../support/openssl-certs.js';
import { Scratch } from '../support/scratch.js';
import { opensslMissing } from '../support/tools.js';

const ID = 'spiffe://cluster.local/ns/shop/sa/cart';

test('leafFacts reads what X509Certificate reads, for P-256, P-384 and RSA signers, with and without serving names', async () => {
  for (const keySpec of [undefined, { kind: 'ec', curve: 'P-384' }, { kind: 'rsa', bits: 2048 }] as Array<KeySpec | undefined>) {
    const root = await createRootCa({ subject: 'CN=facts root', ttlSeconds: 86400, keySpec });
    const other = await createRootCa({ subject: 'CN=other root', ttlSeconds: 86400, keySpec });
    const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
    const key = await generateKeyPair();
    for (const servingNames of [[], ['localhost', '127.0.0.1']]) {
      const leaf = await issuer.issueAsync({ csr: createCsr({ privateKey: key.privateKey, uri: ID }).pem, spiffeId: ID, ttlSeconds: 3600, servingNames });
      const facts = leafFacts(leaf.der);
      const x = new X509Certificate(Buffer.from(leaf.der));
      assert.deepEqual(facts.uriSans, uriSans(x));
      assert.deepEqual(facts.uriSans, [ID]);
      assert.equal(facts.isCa, x.ca);
      assert.ok(facts.spki.equals(x.publicKey.export({ type: 'spki', format: 'der' })));
      assert.equal(facts.serialHex, x.serialNumber.toLowerCase());
      assert.equal(facts.notBeforeMs, Date.parse(x.validFrom));
      assert.equal(facts.notAfterMs, Date.parse(x.validTo));
      assert.equal(verifyLeafSignature(facts, new X509Certificate(root.der).publicKey), true, 'signed by its issuer');
      assert.equal(verifyLeafSignature(facts, new X509Certificate(other.der).publicKey), false, 'not by another key');
      assert.equal(verifyLeafSignature(facts, key.publicKey), false, 'a key of another kind or curve is a plain no');
    }
    const inter = await createIntermediateCa({ subject: 'CN=facts inter', ttlSeconds: 3600, issuer: { cert: root.cert, privateKey: root.privateKey } });
    const ca = leafFacts(inter.der);
    assert.equal(ca.isCa, true, 'a CA certificate says so');
    assert.equal(verifyLeafSignature(ca, new X509Certificate(root.der).publicKey), true);
  }
  // Past 2049 validity is a GeneralizedTime.
  const far = await createRootCa({ subject: 'CN=far root', ttlSeconds: 40 * 365 * 86400 });
  assert.equal(leafFacts(far.der).notAfterMs, Date.parse(new X509Certificate(far.der).validTo));
  assert.ok(leafFacts(far.der).notAfterMs > Date.UTC(2050, 0, 1));
});

test('leafFacts refuses what is not a certificate, with ERR_PKI_CERT_INVALID', async () => {
  const root = await createRootCa({ subject: 'CN=facts root', ttlSeconds: 86400 });
  for (const bad of [Buffer.alloc(0), Buffer.from('3003020101', 'hex'), root.der.subarray(0, root.der.length - 10), Buffer.from('not der')]) {
    assert.throws(() => leafFacts(bad), { code: 'ERR_PKI_CERT_INVALID' });
  }
});

test('basicConstraintsOf reads cA and pathLenConstraint of openssl-made certificates', { skip: opensslMissing() }, (t) => {
  const pki = new OpensslCerts(Scratch.forTest(t, 'basic-constraints-').dir);
  const root = pki.ca('root', 30, 3);
  const cases: Array<[OpensslCert, BasicConstraints]> = [
    [root, { isCa: true, pathLen: 3 }],
    [pki.ca('no-pathlen'), { isCa: true, pathLen: undefined }],
    [pki.issue('inter-0', root, { ca: true, pathLen: 0 }), { isCa: true, pathLen: 0 }],
    [pki.issue('inter-300', root, { ca: true, pathLen: 300 }), { isCa: true, pathLen: 300 }],
    [pki.issue('leaf', root, { san: 'DNS:x' }), { isCa: false, pathLen: undefined }],
  ];
  for (const [cert, want] of cases) assert.deepEqual(basicConstraintsOf(new X509Certificate(cert.certPem).raw), want, cert.name);
  assert.throws(() => basicConstraintsOf(Buffer.from('not a certificate')), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_CERT_INVALID');
});
