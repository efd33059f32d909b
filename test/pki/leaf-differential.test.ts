/**
 * Differential proof of the fast leaf path: for the same inputs (serial, times, key,
 * identity, signer) the DER template's TBSCertificate is byte-identical to the one
 * @peculiar/x509 builds, and openssl accepts every certificate from both paths.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  buildLeafReference,
  caKeyMaterial,
  certificateFields,
  createCsr,
  createIntermediateCa,
  createRootCa,
  generateKeyPair,
  LeafTemplate,
  parseCsr,
  pemEncode,
  type CaKeyMaterial,
  type KeySpec,
  type LeafPlan,
} from '../../src/pki/index.js';
import { positiveIntegerContent as positiveIntegerContentForTest } from '../../src/pki/der.js';
import { basicConstraints, keyUsage, KU, makeCustomCert } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const scratch = Scratch.forFile();

interface Signer {
  readonly name: string;
  readonly material: CaKeyMaterial;
  /** PEM files openssl needs: the trust anchor and any untrusted intermediates. */
  readonly rootPem: string;
  readonly untrustedPem: string;
}

async function signers(): Promise<Signer[]> {
  const out: Signer[] = [];
  const ttlSeconds = 100 * 365 * 86400; // past 2050, so GeneralizedTime leaves are in range
  for (const [name, keySpec] of [
    ['p256-root', undefined],
    ['p384-root', { kind: 'ec', curve: 'P-384' }],
    ['rsa2048-root', { kind: 'rsa', bits: 2048 }],
  ] as Array<[string, KeySpec | undefined]>) {
    const root = await createRootCa({ subject: `O=cluster.local, CN=${name}`, ttlSeconds, keySpec });
    out.push({ name, material: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }), rootPem: root.pem, untrustedPem: '' });
  }
  const root = await createRootCa({ subject: 'O=example, CN=Root', ttlSeconds });
  const inter = await createIntermediateCa({
    subject: 'O=example, OU=mesh, CN=Intermediate ÄÖ',
    ttlSeconds,
    issuer: { cert: root.cert, privateKey: root.privateKey },
  });
  out.push({
    name: 'intermediate',
    material: caKeyMaterial({ cert: inter.cert, keyObject: inter.privateKey, chain: [], roots: [root.cert] }),
    rootPem: root.pem,
    untrustedPem: inter.pem,
  });
  // A CA certificate without a subjectKeyIdentifier: the leaf must then carry no AKI.
  const noSkiKey = await generateKeyPair();
  const noSki = await makeCustomCert({
    issuer: { cert: root.cert, privateKey: root.privateKey },
    subject: 'CN=No SKI CA',
    publicKey: noSkiKey.publicKey,
    extensions: [keyUsage(KU.keyCertSign | KU.cRLSign), basicConstraints(true)],
  });
  out.push({
    name: 'no-ski',
    material: caKeyMaterial({ cert: noSki, keyObject: noSkiKey.privateKey, roots: [root.cert] }),
    rootPem: root.pem,
    untrustedPem: pemEncode('CERTIFICATE', new Uint8Array(noSki.rawData)),
  });
  return out;
}

function serialOf(hex: string): Buffer {
  return positiveIntegerContentForTest(Buffer.from(hex, 'hex'));
}

test('fast TBSCertificate == @peculiar/x509 TBSCertificate, and openssl verifies both', { skip: opensslMissing() }, async () => {
  const all = await signers();
  const keys = [await generateKeyPair(), await generateKeyPair({ kind: 'ec', curve: 'P-384' }), await generateKeyPair({ kind: 'rsa', bits: 2048 })];
  const spkis = keys.map((k) => parseCsr(createCsr({ privateKey: k.privateKey, uri: 'spiffe://x/y' }).pem).spki);
  const uris = [
    'spiffe://cluster.local/ns/default/sa/sleep',
    'spiffe://td/ns/a/sa/b',
    `spiffe://example.org/${'p'.repeat(150)}`,
    `spiffe://example.org/${'q/'.repeat(600)}end`,
  ];
  const plans: LeafPlan[] = [
    { serial: serialOf('0123456789abcdef0123456789abcdef'), notBeforeMs: Date.UTC(2026, 0, 1, 0, 0, 0), notAfterMs: Date.UTC(2026, 0, 2, 0, 0, 0) },
    { serial: serialOf('ff' + '00'.repeat(15)), notBeforeMs: Date.UTC(2026, 5, 30, 23, 59, 59), notAfterMs: Date.UTC(2049, 11, 31, 23, 59, 59) },
    { serial: serialOf('0000000000000000000000000000007f'), notBeforeMs: Date.UTC(2049, 11, 31, 0, 0, 0), notAfterMs: Date.UTC(2050, 0, 1, 0, 0, 0) },
    { serial: serialOf('80'), notBeforeMs: Date.UTC(2051, 2, 3, 4, 5, 6), notAfterMs: Date.UTC(2052, 2, 3, 4, 5, 6) },
    { serial: serialOf('01'), notBeforeMs: Date.UTC(2030, 9, 9, 9, 9, 9), notAfterMs: Date.UTC(2030, 9, 10, 9, 9, 9) },
  ];
  let compared = 0;
  const verifyJobs: Array<{ signer: Signer; files: string[] }> = [];
  for (const signer of all) {
    const template = new LeafTemplate(signer.material.leafSigner);
    const files: string[] = [];
    for (let i = 0; i < plans.length; i++) {
      const plan = plans[i]!;
      const spki = spkis[i % spkis.length]!;
      const uri = uris[i % uris.length]!;
      const fastTbs = template.buildTbs(plan, spki, uri);
      const ref = await buildLeafReference({ plan, spki, uri, signer: signer.material.leafSigner });
      assert.equal(fastTbs.toString('hex'), ref.tbs.toString('hex'), `${signer.name} plan ${i}`);
      compared++;
      const fastDer = template.signTbs(fastTbs);
      assert.equal(Buffer.from(certificateFields(fastDer).tbs).equals(ref.tbs), true);
      files.push(await scratch.write(`${signer.name}-${i}-fast.pem`, pemEncode('CERTIFICATE', fastDer)));
      files.push(await scratch.write(`${signer.name}-${i}-ref.pem`, pemEncode('CERTIFICATE', ref.der)));
    }
    verifyJobs.push({ signer, files });
  }
  assert.equal(compared, all.length * plans.length);
  for (const { signer, files } of verifyJobs) {
    const rootFile = await scratch.write(`${signer.name}-root.pem`, signer.rootPem);
    const args = ['verify', '-no_check_time', '-CAfile', rootFile];
    if (signer.untrustedPem !== '') args.push('-untrusted', await scratch.write(`${signer.name}-inter.pem`, signer.untrustedPem));
    const r = await openssl([...args, ...files]);
    assert.equal(r.code, 0, `${signer.name}: ${r.stdout}${r.stderr}`);
    const oks = r.stdout.split('\n').filter((l) => l.endsWith(': OK'));
    assert.equal(oks.length, files.length, r.stdout);
  }
});

test('randomised differential run: 200 leaves with random serials, times, keys and identities', { skip: opensslMissing() }, async () => {
  const [signer] = await signers();
  const template = new LeafTemplate(signer!.material.leafSigner);
  const keys = await Promise.all(Array.from({ length: 8 }, () => generateKeyPair()));
  const spkis = keys.map((k) => parseCsr(createCsr({ privateKey: k.privateKey, uri: 'spiffe://x/y' }).der).spki);
  let seed = 12345;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    return seed / 0x80000000;
  };
  const files: string[] = [];
  for (let i = 0; i < 200; i++) {
    const serialBytes = Buffer.alloc(16);
    for (let b = 0; b < 16; b++) serialBytes[b] = Math.floor(rnd() * 256);
    if (serialBytes.every((b) => b === 0)) serialBytes[15] = 1;
    const nb = Date.UTC(2020, 0, 1) + Math.floor(rnd() * 40 * 365 * 86400) * 1000;
    const plan: LeafPlan = { serial: serialOf(serialBytes.toString('hex')), notBeforeMs: nb, notAfterMs: nb + Math.floor(1 + rnd() * 90 * 86400) * 1000 };
    const uri = `spiffe://cluster.local/ns/ns${i}/sa/${'s'.repeat(1 + Math.floor(rnd() * 300))}`;
    const spki = spkis[i % spkis.length]!;
    const fast = template.buildTbs(plan, spki, uri);
    const ref = await buildLeafReference({ plan, spki, uri, signer: signer!.material.leafSigner });
    assert.equal(fast.equals(ref.tbs), true, `case ${i}`);
    if (i % 10 === 0) files.push(await scratch.write(`rand-${i}.pem`, pemEncode('CERTIFICATE', template.signTbs(fast))));
  }
  const r = await openssl(['verify', '-no_check_time', '-CAfile', await scratch.write('rand-root.pem', signer!.rootPem), ...files]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
});
