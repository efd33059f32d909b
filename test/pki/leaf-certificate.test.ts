/**
 * LeafTemplate.buildCertificate writes the whole certificate into one buffer (the TBS after
 * room for the outer header, signed in place). It must be exactly signTbs(buildTbs(...)) but for
 * the signature's randomness: same TBS, same algorithm, a signature the CA key verifies, and a
 * DER outer header of the right length, for every CA key kind and past 64 KiB.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPublicKey, verify, X509Certificate } from 'node:crypto';
import { caKeyMaterial, createCsr, createRootCa, FastLeafIssuer, generateKeyPair, LeafTemplate, parseCsr, type KeySpec, type LeafPlan } from '../../src/pki/index.js';
import { positiveIntegerContent, readTlv, TAG_BIT_STRING, TAG_SEQUENCE } from '../../src/pki/der.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';

/** Splits a Certificate into its three elements, checking the outer DER header covers it exactly. */
function splitCertificate(der: Buffer): { tbs: Buffer; alg: Buffer; signature: Buffer } {
  const outer = readTlv(der, 0);
  assert.equal(outer.tag, TAG_SEQUENCE);
  assert.equal(outer.end, der.length, 'outer SEQUENCE covers the whole certificate');
  const tbs = readTlv(der, outer.contentStart, outer.end);
  const alg = readTlv(der, tbs.end, outer.end);
  const sig = readTlv(der, alg.end, outer.end);
  assert.equal(sig.tag, TAG_BIT_STRING);
  assert.equal(sig.end, outer.end);
  assert.equal(der[sig.contentStart], 0, 'no unused bits');
  return { tbs: der.subarray(tbs.start, tbs.end), alg: der.subarray(alg.start, alg.end), signature: der.subarray(sig.contentStart + 1, sig.end) };
}

test('buildCertificate == signTbs(buildTbs) for P-256, P-384, RSA 2048 and 4096 CAs, with and without a > 64 KiB TBS', async () => {
  const specs: KeySpec[] = [{ kind: 'ec', curve: 'P-256' }, { kind: 'ec', curve: 'P-384' }, { kind: 'rsa', bits: 2048 }, { kind: 'rsa', bits: 4096 }];
  const key = await generateKeyPair();
  const spki = parseCsr(createCsr({ privateKey: key.privateKey, uri: ID }).pem).spki;
  const plan: LeafPlan = { serial: positiveIntegerContent(Buffer.from('80' + '11'.repeat(15), 'hex')), notBeforeMs: Date.UTC(2026, 0, 1), notAfterMs: Date.UTC(2026, 0, 2) };
  // A dNSName GeneralName of 70,000 octets: buildTbs takes the encoded names as they are.
  const huge = Buffer.concat([Buffer.from([0x82, 0x83, 0x01, 0x11, 0x70]), Buffer.alloc(70_000, 0x61)]);
  for (const keySpec of specs) {
    const root = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 365 * 86400, keySpec });
    const material = caKeyMaterial({ cert: root.cert, keyObject: root.privateKey });
    const template = new LeafTemplate(material.leafSigner);
    const caPublic = createPublicKey(root.privateKey);
    for (const names of [undefined, huge]) {
      const what = `${JSON.stringify(keySpec)}${names ? ', > 64 KiB' : ''}`;
      const fast = splitCertificate(template.buildCertificate(plan, spki, ID, names));
      const old = splitCertificate(template.signTbs(template.buildTbs(plan, spki, ID, names)));
      assert.ok(fast.tbs.equals(old.tbs), `${what}: same TBSCertificate`);
      assert.ok(fast.alg.equals(old.alg) && fast.alg.equals(template.algorithm.der), `${what}: same algorithm`);
      assert.equal(verify(template.algorithm.hash, fast.tbs, caPublic, fast.signature), true, `${what}: the CA key verifies the signature`);
    }
  }
});

test('FastLeafIssuer leaves come from buildCertificate and node:crypto reads them as signed by the CA', async () => {
  const root = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 365 * 86400 });
  const material = caKeyMaterial({ cert: root.cert, keyObject: root.privateKey });
  const issuer = new FastLeafIssuer({ signer: material.leafSigner });
  const ca = new X509Certificate(root.der);
  for (let i = 0; i < 50; i++) {
    const key = await generateKeyPair();
    const leaf = await issuer.issueAsync({ csr: createCsr({ privateKey: key.privateKey, uri: ID }).pem, spiffeId: ID, ttlSeconds: 3600 });
    const der = Buffer.from(leaf.der);
    splitCertificate(der);
    const cert = new X509Certificate(der);
    assert.equal(cert.verify(ca.publicKey), true, `leaf ${i}`);
    assert.equal(cert.serialNumber.toLowerCase().replace(/^0+/, ''), leaf.serialHex.replace(/^0+/, ''));
  }
});
