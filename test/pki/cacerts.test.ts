import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  createCsr,
  createIntermediateCa,
  createRootCa,
  exportPkcs8Pem,
  FastLeafIssuer,
  generateKeyPair,
  loadCaCertsDir,
  PkiError,
  responseChainPems,
  validateCaBundle,
  type CaBundleTexts,
  type CaCertificate,
} from '../../src/pki/index.js';
import { basicConstraints, keyUsage, KU, makeCustomCert } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const DAY = 86400;
const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const scratch = Scratch.forFile();
let root: CaCertificate;
let inter: CaCertificate;
let bundle: CaBundleTexts;
before(async () => {
  root = await createRootCa({ subject: 'O=cluster.local, CN=Root CA', ttlSeconds: 10 * 365 * DAY });
  inter = await createIntermediateCa({ subject: 'O=cluster.local, CN=Intermediate CA', ttlSeconds: 365 * DAY, issuer: { cert: root.cert, privateKey: root.privateKey } });
  bundle = { caCertPem: inter.pem, caKeyPem: exportPkcs8Pem(inter.privateKey).reveal(), certChainPem: inter.pem + root.pem, rootCertPem: root.pem };
});

async function writeDir(name: string, files: Partial<Record<string, string>>): Promise<string> {
  const dir = scratch.path(name);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir);
  for (const [f, content] of Object.entries(files)) if (content !== undefined) await writeFile(join(dir, f), content);
  return dir;
}

function filesOf(b: CaBundleTexts): Record<string, string> {
  return { 'ca-cert.pem': b.caCertPem, 'ca-key.pem': b.caKeyPem, 'cert-chain.pem': b.certChainPem, 'root-cert.pem': b.rootCertPem };
}

async function codeOfAsync(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof PkiError, String(err));
    return err.code;
  }
  return 'no error';
}

test('a valid cacerts directory loads and its leaves verify with openssl', { skip: opensslMissing() }, async () => {
  const dir = await writeDir('good', filesOf(bundle));
  const m = await loadCaCertsDir(dir);
  assert.equal(m.cert.subject, 'O=cluster.local, CN=Intermediate CA');
  assert.equal(m.chain.length, 0);
  assert.equal(m.roots.length, 1);
  assert.equal(m.signerIsRoot, false);
  const leaf = new FastLeafIssuer({ signer: m.leafSigner }).issue({ csr: createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: ID }).pem, spiffeId: ID, ttlSeconds: 600 });
  const chain = responseChainPems(m);
  assert.deepEqual(chain, [inter.pem, root.pem]);
  const r = await openssl(['verify', '-CAfile', join(dir, 'root-cert.pem'), '-untrusted', join(dir, 'cert-chain.pem'), await scratch.write('leaf.pem', leaf.pem)]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  // cert-chain.pem without the root, and EC/RSA key PEM flavours openssl writes, load too.
  const sec1 = await openssl(['ec', '-in', await scratch.write('k.pem', bundle.caKeyPem)]);
  assert.equal(sec1.code, 0, sec1.stderr);
  assert.match(sec1.stdout, /BEGIN EC PRIVATE KEY/);
  await loadCaCertsDir(await writeDir('noroot', filesOf({ ...bundle, certChainPem: inter.pem, caKeyPem: sec1.stdout })));
});

test('several roots in root-cert.pem (rotation) and a two-level chain', async () => {
  const newRoot = await createRootCa({ subject: 'O=cluster.local, CN=New Root', ttlSeconds: 10 * 365 * DAY });
  const i1 = await createIntermediateCa({ subject: 'CN=Mid', ttlSeconds: 365 * DAY, issuer: { cert: root.cert, privateKey: root.privateKey } });
  const i2 = await createIntermediateCa({ subject: 'CN=Signer', ttlSeconds: 365 * DAY, issuer: { cert: i1.cert, privateKey: i1.privateKey } });
  const m = validateCaBundle(
    { caCertPem: i2.pem, caKeyPem: exportPkcs8Pem(i2.privateKey).reveal(), certChainPem: i2.pem + i1.pem + root.pem, rootCertPem: newRoot.pem + root.pem },
    Date.now(),
  );
  assert.equal(m.roots.length, 2);
  assert.deepEqual(m.chain.map((c) => c.subject), ['CN=Mid']);
  assert.deepEqual(responseChainPems(m), [i2.pem, i1.pem, newRoot.pem + root.pem]);
  // A self-signed root used directly as ca-cert (istio-ca-secret style) is fine too.
  const direct = validateCaBundle({ caCertPem: root.pem, caKeyPem: exportPkcs8Pem(root.privateKey).reveal(), certChainPem: root.pem, rootCertPem: root.pem }, Date.now());
  assert.equal(direct.signerIsRoot, true);
  assert.deepEqual(responseChainPems(direct), [root.pem]);
});

test('partial or inconsistent bundles are clear coded errors', async () => {
  const missing = await writeDir('partial', { ...filesOf(bundle), 'ca-key.pem': undefined, 'root-cert.pem': undefined });
  const err = await loadCaCertsDir(missing).catch((e: unknown) => e);
  assert.ok(err instanceof PkiError);
  assert.equal(err.code, 'ERR_PKI_CACERTS_MISSING');
  assert.match(err.message, /ca-key\.pem, root-cert\.pem/);
  assert.equal(await codeOfAsync(loadCaCertsDir(scratch.path('does-not-exist'))), 'ERR_PKI_CACERTS_MISSING');

  const otherKey = exportPkcs8Pem((await generateKeyPair()).privateKey).reveal();
  const stranger = await createRootCa({ subject: 'CN=Stranger', ttlSeconds: DAY });
  const now = Date.now();
  const cases: Array<[string, Partial<CaBundleTexts>, string]> = [
    ['key of another cert', { caKeyPem: otherKey }, 'ERR_PKI_CACERTS_KEY_MISMATCH'],
    ['root that did not sign the chain', { rootCertPem: stranger.pem }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['chain not starting with ca-cert', { certChainPem: root.pem }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['garbage ca-cert', { caCertPem: 'garbage' }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['garbage key', { caKeyPem: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['key where cert should be', { caCertPem: bundle.caKeyPem }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['two certs in ca-cert', { caCertPem: inter.pem + root.pem }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['non-root in root-cert', { rootCertPem: inter.pem }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['empty root-cert', { rootCertPem: '' }, 'ERR_PKI_CACERTS_INCONSISTENT'],
    ['unrelated cert in chain', { certChainPem: inter.pem + stranger.pem + root.pem }, 'ERR_PKI_CACERTS_INCONSISTENT'],
  ];
  for (const [name, patch, code] of cases) {
    assert.throws(() => validateCaBundle({ ...bundle, ...patch }, now), (e: unknown) => e instanceof PkiError && e.code === code, name);
  }
  // The same through the directory adapter.
  assert.equal(await codeOfAsync(loadCaCertsDir(await writeDir('mismatch', filesOf({ ...bundle, caKeyPem: otherKey })))), 'ERR_PKI_CACERTS_KEY_MISMATCH');
  // Expired signer, and a CA cert that is not a CA.
  assert.throws(() => validateCaBundle(bundle, now + 400 * DAY * 1000), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_SIGNER_EXPIRED');
  const leafKey = await generateKeyPair();
  const notCa = await makeCustomCert({ issuer: { cert: root.cert, privateKey: root.privateKey }, subject: 'CN=Not a CA', publicKey: leafKey.publicKey, extensions: [keyUsage(KU.digitalSignature), basicConstraints(false)] });
  const notCaPem = notCa.toString('pem') + '\n';
  assert.throws(
    () => validateCaBundle({ caCertPem: notCaPem, caKeyPem: exportPkcs8Pem(leafKey.privateKey).reveal(), certChainPem: notCaPem + root.pem, rootCertPem: root.pem }, now),
    (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_SIGNER_NOT_CA',
  );
  // Error messages never carry key material.
  try {
    validateCaBundle({ ...bundle, caKeyPem: otherKey }, now);
  } catch (e) {
    const body = otherKey.split('\n')[1]!;
    assert.ok(!String((e as Error).message).includes(body.slice(0, 20)));
  }
});

test('pathLen on the root is enforced against the signing cert', async () => {
  const strict = await createRootCa({ subject: 'CN=Strict', ttlSeconds: DAY, pathLength: 0 });
  const i = await createIntermediateCa({ subject: 'CN=I', ttlSeconds: DAY, issuer: { cert: strict.cert, privateKey: strict.privateKey } });
  assert.throws(
    () => validateCaBundle({ caCertPem: i.pem, caKeyPem: exportPkcs8Pem(i.privateKey).reveal(), certChainPem: i.pem, rootCertPem: strict.pem }, Date.now()),
    (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_CACERTS_INCONSISTENT' && /pathLen/.test(e.message),
  );
});
