import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  caKeyMaterial,
  createCsr,
  createIntermediateCa,
  createRootCa,
  FastLeafIssuer,
  generateKeyPair,
  parseCertificate,
  parseCertificates,
  PkiError,
  verifyChain,
  x509,
} from '../../src/pki/index.js';
import { basicConstraints, codeOf, keyUsage, KU, makeCustomCert } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const DAY = 86400;
const scratch = Scratch.forFile();

async function leafFrom(cert: x509.X509Certificate, privateKey: import('node:crypto').KeyObject, roots: x509.X509Certificate[]) {
  const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert, keyObject: privateKey, roots }).leafSigner });
  const key = await generateKeyPair();
  return parseCertificate(issuer.issue({ csr: createCsr({ privateKey: key.privateKey, uri: ID }).pem, spiffeId: ID, ttlSeconds: 3600 }).pem);
}

test('leaf -> two intermediates -> root verifies in any intermediate order; openssl agrees', { skip: opensslMissing() }, async () => {
  const root = await createRootCa({ subject: 'CN=Root', ttlSeconds: 10 * 365 * DAY });
  const i1 = await createIntermediateCa({ subject: 'CN=I1', ttlSeconds: 365 * DAY, issuer: { cert: root.cert, privateKey: root.privateKey } });
  const i2 = await createIntermediateCa({ subject: 'CN=I2', ttlSeconds: 365 * DAY, issuer: { cert: i1.cert, privateKey: i1.privateKey } });
  const leaf = await leafFrom(i2.cert, i2.privateKey, [root.cert]);
  const now = Date.now();
  const path = verifyChain({ leaf, intermediates: [i1.cert, i2.cert], roots: [root.cert], nowMs: now });
  assert.deepEqual(path.map((c) => c.subject), ['', 'CN=I2', 'CN=I1', 'CN=Root']);
  const path2 = verifyChain({ leaf, intermediates: [i2.cert, i1.cert], roots: [root.cert], nowMs: now });
  assert.equal(path2.length, 4);
  // A bundle with several roots (rotation): the right one is found.
  const other = await createRootCa({ subject: 'CN=Other Root', ttlSeconds: DAY });
  assert.equal(verifyChain({ leaf, intermediates: [i1.cert, i2.cert], roots: [other.cert, root.cert], nowMs: now }).length, 4);

  const r = await openssl([
    'verify',
    '-CAfile', await scratch.write('root.pem', root.pem),
    '-untrusted', await scratch.write('inters.pem', i2.pem + i1.pem),
    await scratch.write('leaf.pem', Buffer.from(leaf.toString('pem'))),
  ]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const text = await openssl(['x509', '-in', scratch.path('inters.pem'), '-noout', '-text']);
  assert.match(text.stdout, /Basic Constraints: critical\s*\n\s*CA:TRUE/);
  assert.match(text.stdout, /Key Usage: critical\s*\n\s*Certificate Sign, CRL Sign/);
  assert.match(text.stdout, /Subject Key Identifier/);
  assert.match(text.stdout, /Authority Key Identifier/);
  assert.equal(parseCertificates(i2.pem + i1.pem).length, 2);
});

test('broken chains fail with specific codes (and openssl agrees where it applies)', { skip: opensslMissing() }, async () => {
  const root = await createRootCa({ subject: 'CN=Root', ttlSeconds: 10 * 365 * DAY });
  const inter = await createIntermediateCa({ subject: 'CN=I', ttlSeconds: 365 * DAY, issuer: { cert: root.cert, privateKey: root.privateKey } });
  const leaf = await leafFrom(inter.cert, inter.privateKey, [root.cert]);
  const now = Date.now();
  assert.equal(codeOf(() => verifyChain({ leaf, intermediates: [], roots: [root.cert], nowMs: now })), 'ERR_PKI_CHAIN_BROKEN');
  const r = await openssl(['verify', '-CAfile', await scratch.write('r.pem', root.pem), await scratch.write('l.pem', leaf.toString('pem'))]);
  assert.notEqual(r.code, 0, 'openssl also refuses without the intermediate');
  assert.equal(codeOf(() => verifyChain({ leaf, intermediates: [inter.cert], roots: [], nowMs: now })), 'ERR_PKI_CHAIN_EMPTY');
  const stranger = await createRootCa({ subject: 'CN=Stranger', ttlSeconds: DAY });
  assert.equal(codeOf(() => verifyChain({ leaf: root.cert, roots: [stranger.cert], nowMs: now })), 'ERR_PKI_CHAIN_UNTRUSTED');
  // Same name, different key: found by name, signature fails.
  const impostor = await createRootCa({ subject: 'CN=Root', ttlSeconds: DAY });
  assert.equal(codeOf(() => verifyChain({ leaf, intermediates: [inter.cert], roots: [impostor.cert], nowMs: now })), 'ERR_PKI_CHAIN_SIGNATURE');
  // Expired / not yet valid.
  assert.equal(codeOf(() => verifyChain({ leaf, intermediates: [inter.cert], roots: [root.cert], nowMs: now + 2 * 3600_000 })), 'ERR_PKI_CHAIN_EXPIRED');
  assert.equal(codeOf(() => verifyChain({ leaf, intermediates: [inter.cert], roots: [root.cert], nowMs: now - 3600_000 })), 'ERR_PKI_CHAIN_EXPIRED');
  // An issuer that is not a CA.
  const notCaKey = await generateKeyPair();
  const notCa = await makeCustomCert({ issuer: { cert: root.cert, privateKey: root.privateKey }, subject: 'CN=Not A CA', publicKey: notCaKey.publicKey, extensions: [keyUsage(KU.keyCertSign), basicConstraints(false)] });
  const underNotCa = await leafFrom(notCa, notCaKey.privateKey, [root.cert]);
  assert.equal(codeOf(() => verifyChain({ leaf: underNotCa, intermediates: [notCa], roots: [root.cert], nowMs: now })), 'ERR_PKI_CHAIN_NOT_CA');
  const r2 = await openssl(['verify', '-CAfile', scratch.path('r.pem'), '-untrusted', await scratch.write('nc.pem', notCa.toString('pem')), await scratch.write('unc.pem', underNotCa.toString('pem'))]);
  assert.notEqual(r2.code, 0, 'openssl also refuses a non-CA issuer');
  // pathLen 1 on the root allows one intermediate below it, not two.
  const strict = await createRootCa({ subject: 'CN=Strict', ttlSeconds: DAY, pathLength: 1 });
  const i1 = await createIntermediateCa({ subject: 'CN=I1', ttlSeconds: DAY, issuer: { cert: strict.cert, privateKey: strict.privateKey } });
  const leaf1 = await leafFrom(i1.cert, i1.privateKey, [strict.cert]);
  assert.equal(verifyChain({ leaf: leaf1, intermediates: [i1.cert], roots: [strict.cert], nowMs: now }).length, 3);
  const i2 = await createIntermediateCa({ subject: 'CN=I2', ttlSeconds: DAY, issuer: { cert: i1.cert, privateKey: i1.privateKey } });
  const leaf2 = await leafFrom(i2.cert, i2.privateKey, [strict.cert]);
  assert.equal(codeOf(() => verifyChain({ leaf: leaf2, intermediates: [i1.cert, i2.cert], roots: [strict.cert], nowMs: now })), 'ERR_PKI_CHAIN_PATHLEN');
  const r3 = await openssl(['verify', '-CAfile', await scratch.write('s.pem', strict.pem), '-untrusted', await scratch.write('i12.pem', i1.pem + i2.pem), await scratch.write('l2.pem', leaf2.toString('pem'))]);
  assert.notEqual(r3.code, 0, 'openssl also enforces pathlen');
});

test('intermediates are clamped to the issuer lifetime; bad CA options are coded errors', { skip: opensslMissing() }, async () => {
  const root = await createRootCa({ subject: 'CN=Root', ttlSeconds: 3600 });
  const inter = await createIntermediateCa({ subject: 'CN=I', ttlSeconds: 365 * DAY, issuer: { cert: root.cert, privateKey: root.privateKey } });
  assert.equal(inter.cert.notAfter.getTime(), root.cert.notAfter.getTime());
  await assert.rejects(createRootCa({ subject: 'CN=x', ttlSeconds: 0 }), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_TTL_INVALID');
  for (const subject of ['not a dn ===', '', 'CN', '=x', 'FOO=bar']) {
    await assert.rejects(createRootCa({ subject, ttlSeconds: 60 }), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_CERT_INVALID', subject);
  }
  const zero = await createRootCa({ subject: 'CN=Zero', ttlSeconds: DAY, pathLength: 0 });
  const z1 = await createIntermediateCa({ subject: 'CN=Z1', ttlSeconds: DAY, issuer: { cert: zero.cert, privateKey: zero.privateKey } });
  assert.equal(codeOf(() => verifyChain({ leaf: z1.cert, roots: [zero.cert], nowMs: Date.now() })), 'no error');
  const zl = await leafFrom(z1.cert, z1.privateKey, [zero.cert]);
  assert.equal(codeOf(() => verifyChain({ leaf: zl, intermediates: [z1.cert], roots: [zero.cert], nowMs: Date.now() })), 'ERR_PKI_CHAIN_PATHLEN');
  const rsa = await createRootCa({ subject: 'CN=RSA Root', ttlSeconds: 3600, keySpec: { kind: 'rsa', bits: 2048 } });
  const text = await openssl(['x509', '-in', await scratch.write('rsa.pem', rsa.pem), '-noout', '-text']);
  assert.match(text.stdout, /sha256WithRSAEncryption/);
  assert.match(text.stdout, /Public-Key: \(2048 bit\)/);
});

test('parseResponseChain splits and verifies an IstioCertificateResponse chain', async () => {
  const { parseResponseChain, responseChainPems } = await import('../../src/pki/index.js');
  const { x509SvidChainProblems } = await import('../../src/spiffe/index.js');
  const root = await createRootCa({ subject: 'CN=Root', ttlSeconds: DAY });
  const other = await createRootCa({ subject: 'CN=Next Root', ttlSeconds: DAY });
  const inter = await createIntermediateCa({ subject: 'CN=I', ttlSeconds: DAY, issuer: { cert: root.cert, privateKey: root.privateKey } });
  const material = caKeyMaterial({ cert: inter.cert, keyObject: inter.privateKey, roots: [other.cert, root.cert] });
  const leaf = new FastLeafIssuer({ signer: material.leafSigner }).issue({ csr: createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: ID }).pem, spiffeId: ID, ttlSeconds: 600 });
  const response = [leaf.pem, ...responseChainPems(material)];
  assert.equal(response.length, 3);
  const parsed = parseResponseChain(response, Date.now());
  assert.deepEqual(parsed.intermediates.map((c) => c.subject), ['CN=I']);
  assert.deepEqual(parsed.roots.map((c) => c.subject), ['CN=Next Root', 'CN=Root']);
  const svid = x509SvidChainProblems([parsed.leaf, ...parsed.intermediates, ...parsed.roots]);
  assert.equal(svid.spiffeId?.id, ID);
  assert.deepEqual(svid.problems, []);
  // The leaf checked as a signing cert, or a CA checked as a leaf, is reported with its position.
  const swapped = x509SvidChainProblems([parsed.intermediates[0]!, parsed.leaf]);
  assert.ok(swapped.problems.some((p) => p.code === 'ERR_SVID_URI_SAN_MISSING'));
  assert.ok(swapped.problems.some((p) => p.code === 'ERR_SVID_SIGNING_NOT_CA' && p.message.startsWith('chain[1]')));
  assert.equal(codeOf(() => parseResponseChain([leaf.pem], Date.now())), 'ERR_PKI_CHAIN_EMPTY');
  assert.equal(codeOf(() => parseResponseChain([leaf.pem, other.pem], Date.now())), 'ERR_PKI_CHAIN_BROKEN');
  assert.equal(codeOf(() => parseResponseChain([leaf.pem + leaf.pem, inter.pem, root.pem], Date.now())), 'ERR_PKI_CERT_INVALID');
  assert.equal(codeOf(() => parseResponseChain([leaf.pem, 'garbage', root.pem], Date.now())), 'ERR_PKI_PEM_EMPTY');
});
