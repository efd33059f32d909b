import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import {
  createCsr,
  generateKeyPair,
  LeafIssuerPool,
  parseCertificate,
  PkiError,
  verifyChain,
  type CaCertificate,
  type LeafSigner,
} from '../../src/pki/index.js';
import { SpiffeError } from '../../src/spiffe/index.js';
import { makePoolCa, makeRoot } from './fixtures.js';
import { openssl, Scratch } from './openssl.js';
import { opensslMissing } from '../support/tools.js';

const scratch = Scratch.forFile();
let root: CaCertificate;
let signer: LeafSigner;
before(async () => ({ root, signer } = await makePoolCa()));

test('the pool issues on worker threads; openssl verifies the results; errors keep their codes', { skip: opensslMissing() }, async () => {
  const pool = new LeafIssuerPool({ signer, size: 2, maxTtlSeconds: 7200 });
  try {
    const keys = await Promise.all(Array.from({ length: 6 }, () => generateKeyPair()));
    const requests = Array.from({ length: 60 }, (_, i) => ({
      csr: createCsr({ privateKey: keys[i % keys.length]!.privateKey, uri: 'spiffe://ignored/x' }).pem,
      spiffeId: `spiffe://cluster.local/ns/ns${i}/sa/sa${i}`,
      ttlSeconds: 3600,
    }));
    const leaves = await Promise.all(requests.map((r) => pool.issue(r)));
    assert.equal(new Set(leaves.map((l) => l.serialHex)).size, 60);
    const files: string[] = [];
    for (let i = 0; i < leaves.length; i++) {
      const leaf = leaves[i]!;
      assert.equal(leaf.spiffeId, requests[i]!.spiffeId);
      assert.ok(leaf.der instanceof Uint8Array);
      // The DER (decoded from the PEM on the main thread) is the certificate, and survives a spread.
      assert.deepEqual(Buffer.from({ ...leaf }.der), Buffer.from(parseCertificate(leaf.pem).rawData));
      const cert = parseCertificate(leaf.pem);
      verifyChain({ leaf: cert, roots: [root.cert], nowMs: Date.now() });
      if (i % 6 === 0) files.push(await scratch.write(`pool-${i}.pem`, leaf.pem));
    }
    const r = await openssl(['verify', '-CAfile', await scratch.write('root.pem', root.pem), ...files]);
    assert.equal(r.code, 0, r.stdout + r.stderr);

    const good = requests[0]!;
    const results = await Promise.allSettled([
      pool.issue({ ...good, csr: 'garbage' }),
      pool.issue({ ...good, ttlSeconds: 7201 }),
      pool.issue({ ...good, spiffeId: 'spiffe://x/a/../b' }),
      pool.issue(good),
    ]);
    const codes = results.map((x) => (x.status === 'rejected' ? (x.reason as PkiError).code : 'ok'));
    assert.deepEqual(codes, ['ERR_PKI_PEM_EMPTY', 'ERR_PKI_TTL_TOO_LONG', 'ERR_SPIFFE_ID_PATH_DOT_SEGMENT', 'ok']);
    assert.ok((results[0] as PromiseRejectedResult).reason instanceof PkiError);
    assert.ok((results[2] as PromiseRejectedResult).reason instanceof SpiffeError);

    // A new signer applies to later requests.
    const rotated = await makeRoot('O=rotated', 86400);
    pool.setSigner(rotated.material.leafSigner);
    const after = parseCertificate((await pool.issue(good)).pem);
    assert.equal(after.issuer, 'O=rotated');
    verifyChain({ leaf: after, roots: [rotated.root.cert], nowMs: Date.now() });
  } finally {
    await pool.close();
  }
  await assert.rejects(pool.issue({ csr: 'x', spiffeId: 'spiffe://a/b', ttlSeconds: 1 }), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_POOL_CLOSED');
});

test('an unusable signer is refused up front, never sent to (and crashing) the workers', async () => {
  const good = signer;
  const other = await generateKeyPair({ kind: 'ec', curve: 'P-384' });
  const bad = { ...good, privateKey: other.privateKey };
  assert.throws(() => new LeafIssuerPool({ signer: bad, size: 1 }), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_KEY_INVALID');
  assert.throws(() => new LeafIssuerPool({ signer: { ...good, privateKey: other.publicKey }, size: 1 }), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_KEY_INVALID');
  const pool = new LeafIssuerPool({ signer: good, size: 1 });
  try {
    assert.throws(() => pool.setSigner(bad), (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_KEY_INVALID');
    const csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: 'spiffe://x/y' }).pem;
    const leaf = await pool.issue({ csr, spiffeId: 'spiffe://cluster.local/ns/a/sa/b', ttlSeconds: 60 });
    verifyChain({ leaf: parseCertificate(leaf.pem), roots: [root.cert], nowMs: Date.now() });
  } finally {
    await pool.close();
  }
});

test('close({drainMs}) answers the requests already taken; close() fails them with ERR_PKI_POOL_CLOSED', async () => {
  const csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: 'spiffe://x/y' }).pem;
  const request = { csr, spiffeId: 'spiffe://cluster.local/ns/a/sa/b', ttlSeconds: 600 };
  const closedCode = (e: unknown) => e instanceof PkiError && e.code === 'ERR_PKI_POOL_CLOSED';

  const draining = new LeafIssuerPool({ signer, size: 2 });
  const taken = Array.from({ length: 40 }, () => draining.issue(request));
  const closing = draining.close({ drainMs: 60_000 });
  await assert.rejects(draining.issue(request), closedCode);
  const leaves = await Promise.all(taken);
  await closing;
  assert.equal(new Set(leaves.map((l) => l.serialHex)).size, 40);
  for (const leaf of leaves.slice(0, 3)) verifyChain({ leaf: parseCertificate(leaf.der), roots: [root.cert], nowMs: Date.now() });

  const abrupt = new LeafIssuerPool({ signer, size: 1 });
  const dropped = Array.from({ length: 20 }, () => abrupt.issue(request));
  const settling = Promise.allSettled(dropped);
  await abrupt.close();
  const settled = await settling;
  assert.ok(settled.every((s) => s.status === 'rejected' && closedCode(s.reason)), JSON.stringify(settled.map((s) => s.status)));
});
