/**
 * The CSRs the CA takes and refuses, through the pool's workers (the path the CA signs on): P-256,
 * P-384 and RSA 2048 CSRs from us and from openssl, PEM (with CRLF and odd line lengths) and DER,
 * are issued and verify against the root; a tampered signature, a broken body, garbage and an
 * Ed25519 CSR come back with their codes.
 */
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import { createCsr, generateKeyPair, LeafIssuerPool, PkiError, type CaCertificate, type KeySpec, type LeafSigner } from '../../src/pki/index.js';
import { makePoolCa } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const scratch = Scratch.forFile();
let root: CaCertificate;
let signer: LeafSigner;
before(async () => ({ root, signer } = await makePoolCa()));

async function opensslCsr(name: string, args: readonly string[]): Promise<string> {
  const out = scratch.path(`${name}.csr`);
  const r = await openssl(['req', '-new', ...args, '-nodes', '-keyout', scratch.path(`${name}.key`), '-subj', '/', '-out', out]);
  assert.equal(r.code, 0, `${name}: ${r.stderr}`);
  return readFile(out, 'utf8');
}

test('the pool issues P-256, P-384 and RSA CSRs (ours and openssl\'s, PEM and DER) and refuses bad ones with their codes', { skip: opensslMissing() }, async () => {
  const pool = new LeafIssuerPool({ signer, size: 2 });
  try {
    const specs: (KeySpec | undefined)[] = [undefined, { kind: 'ec', curve: 'P-384' }, { kind: 'rsa', bits: 2048 }];
    const good: (string | Uint8Array)[] = [];
    for (const spec of specs) {
      const csr = createCsr({ privateKey: (await generateKeyPair(spec)).privateKey, uri: ID });
      const oddLines = csr.der.toString('base64').replace(/(.{50})/g, '$1\n');
      good.push(csr.pem, csr.der, csr.pem.replace(/\n/g, '\r\n'), `-----BEGIN CERTIFICATE REQUEST-----\n${oddLines}\n-----END CERTIFICATE REQUEST-----\n`);
    }
    good.push(await opensslCsr('p256', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256']));
    good.push(await opensslCsr('p384', ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-384']));
    good.push(await opensslCsr('rsa3072', ['-newkey', 'rsa:3072']));
    const ca = new X509Certificate(root.der);
    const leaves = await Promise.all(good.map((csr) => pool.issue({ csr, spiffeId: ID, ttlSeconds: 3600 })));
    for (const [i, leaf] of leaves.entries()) {
      const cert = new X509Certificate(Buffer.from(leaf.der));
      assert.equal(cert.verify(ca.publicKey), true, `CSR ${i}: the root verifies the leaf`);
      assert.equal(cert.subjectAltName, `URI:${ID}`, `CSR ${i}`);
    }

    const base = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: ID }).der;
    const tampered = Buffer.from(base);
    tampered[tampered.indexOf(Buffer.from('sleep'))] = 0x78; // in the signed part: the signature no longer matches
    const bad: [string | Uint8Array, string][] = [
      [tampered, 'ERR_PKI_CSR_SIGNATURE_INVALID'],
      [base.subarray(0, base.length - 3), 'ERR_PKI_CSR_MALFORMED'],
      ['-----BEGIN CERTIFICATE REQUEST-----\nAAA=A\n-----END CERTIFICATE REQUEST-----\n', 'ERR_PKI_PEM_INVALID'],
      ['not a csr', 'ERR_PKI_PEM_EMPTY'],
      [await opensslCsr('ed25519', ['-newkey', 'ed25519']), 'ERR_PKI_CSR_UNSUPPORTED_ALGORITHM'],
    ];
    const results = await Promise.allSettled(bad.map(([csr]) => pool.issue({ csr, spiffeId: ID, ttlSeconds: 3600 })));
    assert.deepEqual(
      results.map((r) => (r.status === 'rejected' && r.reason instanceof PkiError ? r.reason.code : r.status)),
      bad.map(([, code]) => code),
    );
  } finally {
    await pool.close();
  }
});
