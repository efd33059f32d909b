import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  caKeyMaterial,
  createCsr,
  createIntermediateCa,
  createRootCa,
  FastLeafIssuer,
  generateKeyPair,
  PkiError,
  parseCertificate,
  responseChainPems,
  x509,
} from '../../src/pki/index.js';
import { checkX509Svid as checkX509SvidForTest, SpiffeError } from '../../src/spiffe/index.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const NOW = Date.UTC(2026, 10, 29, 12, 0, 0, 750);
const scratch = Scratch.forFile();

function counterBytes(start: number): (n: number) => Buffer {
  let c = start;
  return (n) => {
    const b = Buffer.alloc(n);
    b.writeUInt32BE(c++, n - 4);
    return b;
  };
}

test('leaf profile: serial, validity, extensions as istiod, read back by openssl', { skip: opensslMissing() }, async () => {
  const root = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 365 * 86400, nowMs: NOW - 86400_000 });
  const inter = await createIntermediateCa({ subject: 'O=cluster.local, CN=Intermediate', ttlSeconds: 180 * 86400, nowMs: NOW - 86400_000, issuer: { cert: root.cert, privateKey: root.privateKey } });
  const material = caKeyMaterial({ cert: inter.cert, keyObject: inter.privateKey, roots: [root.cert] });
  const issuer = new FastLeafIssuer({ signer: material.leafSigner, now: () => NOW, randomBytes: counterBytes(0x1234) });
  const key = await generateKeyPair();
  // The CSR asks for another identity: it is ignored, the cert carries the one the CA decides.
  const csr = createCsr({ privateKey: key.privateKey, uri: 'spiffe://evil.example/ns/kube-system/sa/admin' });
  const leaf = issuer.issue({ csr: csr.pem, spiffeId: ID, ttlSeconds: 3600 });
  assert.equal(leaf.serialHex, '1234');
  assert.equal(leaf.notBeforeMs, Date.UTC(2026, 10, 29, 11, 58, 0));
  assert.equal(leaf.notAfterMs, Date.UTC(2026, 10, 29, 13, 0, 0));
  assert.equal(leaf.spiffeId, ID);
  const cert = parseCertificate(leaf.pem);
  assert.equal(cert.subject, '');
  assert.equal(cert.notBefore.getTime(), leaf.notBeforeMs);
  assert.equal(cert.notAfter.getTime(), leaf.notAfterMs);
  assert.equal(checkX509SvidForTest(cert)?.id, ID);
  const aki = cert.getExtension(x509.AuthorityKeyIdentifierExtension);
  const ski = inter.cert.getExtension(x509.SubjectKeyIdentifierExtension);
  assert.equal(aki?.keyId, ski?.keyId);
  assert.equal(cert.getExtension(x509.SubjectKeyIdentifierExtension), null);

  const leafFile = await scratch.write('leaf.pem', leaf.pem);
  const text = await openssl(['x509', '-in', leafFile, '-noout', '-text']);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /Serial Number: 4660 \(0x1234\)/);
  assert.match(text.stdout, /Subject:\s*\n/);
  assert.match(text.stdout, /X509v3 Key Usage: critical\s*\n\s*Digital Signature, Key Encipherment\s*\n/);
  assert.match(text.stdout, /X509v3 Extended Key Usage: ?\s*\n\s*TLS Web Server Authentication, TLS Web Client Authentication/);
  assert.match(text.stdout, /X509v3 Basic Constraints: critical\s*\n\s*CA:FALSE/);
  assert.match(text.stdout, /X509v3 Subject Alternative Name: critical\s*\n\s*URI:spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep\s*\n/);
  assert.doesNotMatch(text.stdout, /evil/);
  assert.match(text.stdout, /Signature Algorithm: ecdsa-with-SHA256/);
  const verify = await openssl([
    'verify',
    '-attime', String(Math.floor(NOW / 1000)),
    '-CAfile', await scratch.write('root.pem', root.pem),
    '-untrusted', await scratch.write('inter.pem', inter.pem),
    '-purpose', 'sslclient',
    leafFile,
  ]);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  assert.match(verify.stdout, /leaf\.pem: OK/);
  // The response chain after the leaf: the intermediate, then the root bundle.
  assert.deepEqual(responseChainPems(material), [inter.pem, root.pem]);
});

test('notAfter is clamped to the signer, TTL rules, expired signer', async () => {
  const root = await createRootCa({ subject: 'O=short', ttlSeconds: 7200, nowMs: NOW });
  const material = caKeyMaterial({ cert: root.cert, keyObject: root.privateKey });
  const key = await generateKeyPair();
  const csr = createCsr({ privateKey: key.privateKey, uri: ID }).pem;
  const issuer = new FastLeafIssuer({ signer: material.leafSigner, now: () => NOW, maxTtlSeconds: 86400 });
  const leaf = issuer.issue({ csr, spiffeId: ID, ttlSeconds: 86400 });
  assert.equal(leaf.notAfterMs, root.cert.notAfter.getTime());
  assert.equal(responseChainPems(material).length, 1, 'a self-signed signer sends only the root after the leaf');
  const code = (fn: () => unknown) => {
    try {
      fn();
      return 'no error';
    } catch (err) {
      assert.ok(err instanceof PkiError || err instanceof SpiffeError);
      return err.code;
    }
  };
  assert.equal(code(() => issuer.issue({ csr, spiffeId: ID, ttlSeconds: 86401 })), 'ERR_PKI_TTL_TOO_LONG');
  for (const ttl of [0, -1, 1.5, Number.NaN]) assert.equal(code(() => issuer.issue({ csr, spiffeId: ID, ttlSeconds: ttl })), 'ERR_PKI_TTL_INVALID');
  assert.equal(code(() => issuer.issue({ csr, spiffeId: 'spiffe://cluster.local/a/', ttlSeconds: 60 })), 'ERR_SPIFFE_ID_TRAILING_SLASH');
  assert.equal(code(() => issuer.issue({ csr: 'junk', spiffeId: ID, ttlSeconds: 60 })), 'ERR_PKI_PEM_EMPTY');
  const late = new FastLeafIssuer({ signer: material.leafSigner, now: () => NOW + 7200_000 });
  assert.equal(code(() => late.issue({ csr, spiffeId: ID, ttlSeconds: 60 })), 'ERR_PKI_SIGNER_EXPIRED');
});

test('serials are 128-bit, positive and distinct', { skip: opensslMissing() }, async () => {
  const root = await createRootCa({ subject: 'O=s', ttlSeconds: 3600 });
  const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
  const csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: ID }).pem;
  const seen = new Set<string>();
  let maxLen = 0;
  for (let i = 0; i < 300; i++) {
    const leaf = issuer.issue({ csr, spiffeId: ID, ttlSeconds: 60 });
    assert.ok(leaf.serialHex.length <= 32);
    maxLen = Math.max(maxLen, leaf.serialHex.length);
    seen.add(leaf.serialHex);
    const cert = parseCertificate(leaf.der);
    assert.equal(cert.serialNumber.replace(/^0+/, ''), leaf.serialHex.replace(/^0+/, ''));
  }
  assert.equal(seen.size, 300);
  assert.ok(maxLen >= 31, 'serials use the full 128 bits');
  // A serial with the top bit set is encoded with a 0x00 sign byte (positive).
  const high = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner, randomBytes: (n) => Buffer.alloc(n, 0xff) });
  const leaf = high.issue({ csr, spiffeId: ID, ttlSeconds: 60 });
  assert.equal(leaf.serialHex, 'f'.repeat(32));
  const text = await openssl(['x509', '-noout', '-serial', '-in', await scratch.write('high.pem', leaf.pem)]);
  assert.match(text.stdout, /serial=F{32}\s*$/);
});
