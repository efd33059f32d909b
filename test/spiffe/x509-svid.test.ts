import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkX509Svid, x509SvidProblems, SpiffeError } from '../../src/spiffe/index.js';
import { createCsr, FastLeafIssuer, generateKeyPair, x509 } from '../../src/pki/index.js';
import { basicConstraints, keyUsage, KU, makeCustomCert, makeRoot, uriSan } from '../pki/fixtures.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';

test('a leaf from our issuer is a valid X509-SVID and its root a valid signing cert', async () => {
  const ca = await makeRoot();
  const key = await generateKeyPair();
  const leaf = new FastLeafIssuer({ signer: ca.material.leafSigner }).issue({
    csr: createCsr({ privateKey: key.privateKey, uri: ID }).pem,
    spiffeId: ID,
    ttlSeconds: 3600,
  });
  assert.equal(checkX509Svid(leaf.pem)?.id, ID);
  assert.equal(checkX509Svid(leaf.der)?.trustDomain, 'cluster.local');
  assert.deepEqual(x509SvidProblems(ca.root.cert, { role: 'signing' }).problems, []);
});

test('each X509-SVID rule violation is reported with its code', async () => {
  const ca = await makeRoot();
  const issuer = { cert: ca.root.cert, privateKey: ca.root.privateKey };
  const good = KU.digitalSignature | KU.keyEncipherment;
  const cases: Array<[string, Parameters<typeof makeCustomCert>[0]['extensions'], string[], string?]> = [
    ['no URI SAN', [keyUsage(good), basicConstraints(false)], ['ERR_SVID_URI_SAN_MISSING'], 'CN=x'],
    ['two URI SANs', [keyUsage(good), uriSan([ID, `${ID}2`])], ['ERR_SVID_URI_SAN_MULTIPLE']],
    ['URI not SPIFFE', [keyUsage(good), uriSan(['https://example.org/a'])], ['ERR_SVID_ID_INVALID']],
    ['leaf is CA', [keyUsage(good), basicConstraints(true), uriSan([ID])], ['ERR_SVID_LEAF_IS_CA']],
    ['no key usage', [basicConstraints(false), uriSan([ID])], ['ERR_SVID_KEY_USAGE_MISSING']],
    ['key usage not critical', [keyUsage(good, false), uriSan([ID])], ['ERR_SVID_KEY_USAGE_NOT_CRITICAL']],
    ['no digitalSignature', [keyUsage(KU.keyEncipherment), uriSan([ID])], ['ERR_SVID_KEY_USAGE_NO_DIGITAL_SIGNATURE']],
    ['keyCertSign on leaf', [keyUsage(good | KU.keyCertSign), uriSan([ID])], ['ERR_SVID_LEAF_KEY_CERT_SIGN']],
    ['cRLSign on leaf', [keyUsage(good | KU.cRLSign), uriSan([ID])], ['ERR_SVID_LEAF_CRL_SIGN']],
    ['SAN not critical, empty subject', [keyUsage(good), uriSan([ID], false)], ['ERR_SVID_SAN_NOT_CRITICAL']],
    ['leaf ID without a path', [keyUsage(good), uriSan(['spiffe://cluster.local'])], ['ERR_SVID_LEAF_ID_NO_PATH']],
    ['EKU without clientAuth', [keyUsage(good), new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]), uriSan([ID])], ['ERR_SVID_LEAF_EXT_KEY_USAGE']],
  ];
  for (const [name, extensions, codes, subject] of cases) {
    const cert = await makeCustomCert({ issuer, extensions, subject });
    const { problems } = x509SvidProblems(cert);
    assert.deepEqual(problems.map((p) => p.code), codes, name);
    assert.throws(() => checkX509Svid(cert), (err: unknown) => err instanceof SpiffeError && err.code === codes[0], name);
  }
  // SAN may be non-critical when the subject is not empty.
  const named = await makeCustomCert({ issuer, subject: 'CN=sleep', extensions: [keyUsage(good), uriSan([ID], false)] });
  assert.deepEqual(x509SvidProblems(named).problems, []);
  // Several problems at once are all listed.
  const bad = await makeCustomCert({ issuer, extensions: [keyUsage(KU.keyCertSign, false), basicConstraints(true), uriSan([ID], false)] });
  assert.deepEqual(
    x509SvidProblems(bad).problems.map((p) => p.code).sort(),
    [
      'ERR_SVID_KEY_USAGE_NOT_CRITICAL',
      'ERR_SVID_KEY_USAGE_NO_DIGITAL_SIGNATURE',
      'ERR_SVID_LEAF_IS_CA',
      'ERR_SVID_LEAF_KEY_CERT_SIGN',
      'ERR_SVID_SAN_NOT_CRITICAL',
    ],
  );
});

test('signing certificates need CA:true and keyCertSign', async () => {
  const ca = await makeRoot();
  const issuer = { cert: ca.root.cert, privateKey: ca.root.privateKey };
  const notCa = await makeCustomCert({ issuer, subject: 'CN=x', extensions: [keyUsage(KU.keyCertSign), basicConstraints(false)] });
  assert.deepEqual(x509SvidProblems(notCa, { role: 'signing' }).problems.map((p) => p.code), ['ERR_SVID_SIGNING_NOT_CA']);
  const noSign = await makeCustomCert({ issuer, subject: 'CN=x', extensions: [keyUsage(KU.cRLSign), basicConstraints(true)] });
  assert.deepEqual(x509SvidProblems(noSign, { role: 'signing' }).problems.map((p) => p.code), ['ERR_SVID_SIGNING_NO_KEY_CERT_SIGN']);
  const withPath = await makeCustomCert({ issuer, subject: 'CN=x', extensions: [keyUsage(KU.keyCertSign, false), basicConstraints(true), uriSan([ID])] });
  assert.deepEqual(
    x509SvidProblems(withPath, { role: 'signing' }).problems.map((p) => p.code),
    ['ERR_SVID_SIGNING_ID_HAS_PATH', 'ERR_SVID_KEY_USAGE_NOT_CRITICAL'],
  );
  const tdOnly = await makeCustomCert({ issuer, extensions: [keyUsage(KU.keyCertSign | KU.cRLSign), basicConstraints(true), uriSan(['spiffe://cluster.local'])] });
  assert.equal(x509SvidProblems(tdOnly, { role: 'signing' }).problems.length, 0);
  assert.equal(x509SvidProblems(tdOnly, { role: 'signing' }).spiffeId?.trustDomain, 'cluster.local');
});

test('malformed extensions are a coded problem, not a crash', async () => {
  const ca = await makeRoot();
  const issuer = { cert: ca.root.cert, privateKey: ca.root.privateKey };
  const { x509 } = await import('../../src/pki/index.js');
  const badBc = new x509.Extension('2.5.29.19', true, new Uint8Array([0x05, 0x00]));
  const cert = await makeCustomCert({ issuer, extensions: [keyUsage(KU.digitalSignature), badBc, uriSan([ID])] });
  assert.deepEqual(x509SvidProblems(cert).problems.map((p) => p.code), ['ERR_SVID_CERT_UNPARSEABLE']);
  const badSan = new x509.Extension('2.5.29.17', true, new Uint8Array([0x30, 0x03, 0x86, 0x05, 0x41]));
  const cert2 = await makeCustomCert({ issuer, extensions: [keyUsage(KU.digitalSignature), badSan] });
  assert.ok(x509SvidProblems(cert2).problems.some((p) => p.code === 'ERR_SVID_CERT_UNPARSEABLE'));
});

test('unparseable input is a coded error, not a crash', () => {
  assert.throws(() => checkX509Svid('not a certificate'), (err: unknown) => err instanceof SpiffeError && err.code === 'ERR_SVID_CERT_UNPARSEABLE');
  assert.throws(() => checkX509Svid(new Uint8Array([0x30, 0x03, 1, 2, 3])), (err: unknown) => err instanceof SpiffeError && err.code === 'ERR_SVID_CERT_UNPARSEABLE');
});
