import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { FakeClock } from '../support/fake-clock.js';
import { silentLogger } from '../../src/core/log.js';
import { CacertsSigner, type LeafIssuerFactory, poolIssuerFactory } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { HELD_ID, HELD_LEAF_WORKER, watchHeldWorker } from './support/held-leaf-worker.js';
import { cacertsFiles, makePluginCa, newCsr, opensslText, opensslVerifyChain, tempDir, writeCacerts, writeCacertsAtomic } from './support/pki-fixtures.js';
import { opensslMissing } from '../support/tools.js';

const ID = 'spiffe://cluster.local/ns/default/sa/sleep';

/** `pool`: true for a 2-worker pool, or a factory of the test's own. */
function signerFor(dir: string, clock: FakeClock, pool: boolean | LeafIssuerFactory = false): CacertsSigner {
  return new CacertsSigner({
    dir,
    clock,
    logger: silentLogger,
    maxTtlSeconds: 90 * 86400,
    ...(pool ? { issuerFactory: pool === true ? poolIssuerFactory(2) : pool } : {}),
  });
}

test('cacerts: issues leaf, intermediate, root (last); openssl verifies; X509-SVID rules hold', { skip: opensslMissing() }, async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  const ca = await makePluginCa();
  await writeCacerts(dir.path, ca);
  const signer = signerFor(dir.path, new FakeClock(Date.now()));
  t.after(() => signer.close());
  await signer.start();
  assert.equal(signer.ready, true, signer.notReadyReason);
  const csr = await newCsr('spiffe://evil.example/ns/x/sa/y');
  const signed = await signer.sign({ csrPem: csr, spiffeId: ID, ttlSeconds: 3600 });
  assert.equal(signed.certChain.length, 3);
  assert.equal(signed.certChain[1], ca.intermediate.pem);
  assert.ok(signed.certChain[0]);
  assert.equal(signed.certChain[2], ca.root.pem);
  assert.deepEqual(signer.roots(), [ca.root.pem]);
  assert.match(await opensslVerifyChain(signed.certChain), /leaf\.pem: OK/);
  assert.equal(checkX509Svid(signed.certChain[0]!)?.id, ID, 'the CSR SAN is ignored; the requested identity is certified');
  const text = await opensslText(signed.certChain[0]!);
  assert.match(text, /X509v3 Subject Alternative Name: critical\s+URI:spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep/);
  assert.match(text, /TLS Web Server Authentication, TLS Web Client Authentication/);
  assert.match(text, /CA:FALSE/);
  // The verifier checks purposes: the CA's serving certificate (serverAuth only) is no client cert.
  const serving = await signer.issueServingCertificate({ dnsNames: ['localhost'], ttlSeconds: 3600 });
  const servingChain = [...serving.certChainPem.matchAll(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----\n/g)].map((m) => m[0]);
  assert.equal(servingChain.length, 2);
  assert.match(await opensslVerifyChain([...servingChain, ca.root.pem], { purposes: ['sslserver'] }), /leaf\.pem: OK/);
  await assert.rejects(opensslVerifyChain([...servingChain, ca.root.pem]), /unsuitable certificate purpose/);
});

test('cacerts: worker-pool issuing gives the same chain shape and verifies', { skip: opensslMissing() }, async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  await writeCacerts(dir.path, await makePluginCa());
  const signer = signerFor(dir.path, new FakeClock(Date.now()), true);
  t.after(() => signer.close());
  await signer.start();
  const chains = await Promise.all([1, 2, 3, 4].map(async () => signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 600 })));
  for (const c of chains) assert.match(await opensslVerifyChain(c.certChain), /OK/);
  assert.equal(signer.brokenReason, undefined, 'a working pool is not broken');
  assert.equal(new Set(chains.map((c) => c.serialHex)).size, 4);
});

test('cacerts: not ready until a valid bundle appears; then reloads; bad updates keep the old CA', { skip: opensslMissing() }, async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  const clock = new FakeClock(Date.now());
  const signer = signerFor(dir.path, clock);
  t.after(() => signer.close());
  await signer.start();
  assert.equal(signer.ready, false);
  assert.match(signer.notReadyReason ?? '', /missing/);
  await assert.rejects(signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 60 }), { code: 'ERR_CA_SIGNER_NOT_READY' });

  const first = await makePluginCa('First');
  await writeCacertsAtomic(dir.path, cacertsFiles(first));
  await signer.check();
  assert.equal(signer.ready, true);
  assert.deepEqual(signer.roots(), [first.root.pem]);

  // Root rotation: a new CA whose root-cert.pem also carries the old root; both roots served.
  const second = await makePluginCa('Second');
  let changes = 0;
  signer.onChange(() => changes++);
  await writeCacertsAtomic(dir.path, cacertsFiles(second, [first.root]));
  await signer.check();
  assert.equal(changes, 1);
  assert.deepEqual(signer.roots(), [second.root.pem, first.root.pem]);
  const chain = (await signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 60 })).certChain;
  assert.equal(chain.length, 3);
  assert.equal(chain[2], second.root.pem + first.root.pem, 'root bundle is the last element');
  assert.match(await opensslVerifyChain(chain), /OK/);

  // A key that does not match: rejected, previous material kept.
  await writeCacertsAtomic(dir.path, { ...cacertsFiles(second, [first.root]), 'ca-cert.pem': first.intermediate.pem });
  await signer.check();
  assert.match(signer.lastError ?? '', /ERR_PKI_CACERTS/);
  assert.equal(signer.ready, true);
  assert.deepEqual(signer.roots(), [second.root.pem, first.root.pem]);
});

test('cacerts: a directory that appears later is found by the poll', async (t) => {
  const parent = await tempDir();
  t.after(() => parent.remove());
  const dir = join(parent.path, 'cacerts');
  const clock = new FakeClock(Date.now());
  const signer = new CacertsSigner({ dir, clock, logger: silentLogger, maxTtlSeconds: 86400, pollIntervalMs: 1000 });
  t.after(() => signer.close());
  await signer.start();
  assert.equal(signer.ready, false);
  // The directory did not exist at start, so no fs watch is armed: only the poll can see it.
  const ca = await makePluginCa();
  await mkdir(dir);
  await writeCacerts(dir, ca);
  await clock.waitForTimers(1);
  await clock.advance(1000);
  while (signer.loads === 0) await new Promise((r) => setImmediate(r));
  assert.equal(signer.ready, true);
  assert.deepEqual(signer.roots(), [ca.root.pem]);
});

test('cacerts: notAfter is clamped to a signing certificate that expires first', { skip: opensslMissing() }, async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  const { createIntermediateCa, createRootCa } = await import('../../src/pki/index.js');
  const root = await createRootCa({ subject: 'CN=Clamp Root', ttlSeconds: 365 * 86400 });
  const intermediate = await createIntermediateCa({ subject: 'CN=Short Intermediate', ttlSeconds: 3600, issuer: { cert: root.cert, privateKey: root.privateKey } });
  await writeCacerts(dir.path, { root, intermediate });
  const signer = signerFor(dir.path, new FakeClock(Date.now()));
  t.after(() => signer.close());
  await signer.start();
  const signed = await signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 86400 });
  const { X509Certificate } = await import('node:crypto');
  const leaf = new X509Certificate(signed.certChain[0]!);
  assert.equal(Date.parse(leaf.validTo), intermediate.cert.notAfter.getTime(), 'leaf ends when its signer ends');
  assert.equal(signed.notAfterMs, intermediate.cert.notAfter.getTime());
  assert.match(await opensslVerifyChain(signed.certChain), /OK/);
});

test('cacerts reload with the worker pool: requests taken before it finish with the old CA and its chain, later ones get the new', { skip: opensslMissing() }, async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  const first = await makePluginCa('First');
  const second = await makePluginCa('Second');
  await writeCacertsAtomic(dir.path, cacertsFiles(first));
  // Workers that block on the batch holding HELD_ID until released: that batch (and whatever its
  // worker took after it) is provably unanswered when the reload retires the pool.
  const signer = signerFor(dir.path, new FakeClock(Date.now()), poolIssuerFactory(2, { workerModule: HELD_LEAF_WORKER }));
  t.after(() => signer.close());
  await signer.start();
  const held = watchHeldWorker();
  try {
    const csrs = await Promise.all(Array.from({ length: 64 }, () => newCsr()));
    let settled = 0;
    const taken = [HELD_ID, ...csrs.map(() => ID)].map((spiffeId, i) =>
      signer.sign({ csrPem: csrs[i % csrs.length]!, spiffeId, ttlSeconds: 600 }).finally(() => settled++),
    );
    await held.holding;
    let settledAtChange = -1;
    signer.onChange(() => (settledAtChange = settled));
    await writeCacertsAtomic(dir.path, cacertsFiles(second));
    await signer.check();
    assert.equal(signer.lastError, undefined);
    assert.ok(settledAtChange >= 0 && settledAtChange < taken.length, `requests were still in flight at the reload (${settledAtChange} of ${taken.length} done)`);
    const later = await signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 600 });
    assert.equal(later.certChain.at(-1), second.root.pem, 'a request after the reload goes to the new CA while the old pool is still held');
    held.release();
    const chains = await Promise.all(taken);
    for (const c of chains) assert.equal(c.certChain.at(-1), first.root.pem);
    assert.equal(checkX509Svid(chains[0]!.certChain[0]!)?.id, HELD_ID, 'the held request itself was answered by the old pool');
    for (const c of [chains[0]!, chains.at(-1)!]) assert.match(await opensslVerifyChain(c.certChain), /leaf\.pem: OK/);
    assert.match(await opensslVerifyChain(later.certChain), /leaf\.pem: OK/);
  } finally {
    held.close();
  }
});

test('cacerts + pool: when every signing worker has died the signer is not ready and says it is broken', async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  await writeCacerts(dir.path, await makePluginCa());
  // A worker module that throws while loading: the pool gives its slot up after a few deaths.
  const deadAtStart = poolIssuerFactory(1, { workerModule: new URL('../pki/workers/dead-at-start-worker.js', import.meta.url) });
  const signer = signerFor(dir.path, new FakeClock(Date.now()), deadAtStart);
  t.after(() => signer.close());
  await signer.start();
  const deadline = Date.now() + 60_000;
  while (signer.brokenReason === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(signer.brokenReason, 'every signing worker died');
  assert.equal(signer.ready, false);
  assert.equal(signer.notReadyReason, 'every signing worker died');
  await assert.rejects(signer.sign({ csrPem: await newCsr(), spiffeId: ID, ttlSeconds: 600 }), { code: 'ERR_PKI_POOL_WORKER' });
});


test('cacerts + pool: the signer tells its listeners when the last signing worker is gone (readiness follows the event)', async (t) => {
  const dir = await tempDir();
  t.after(() => dir.remove());
  await writeCacerts(dir.path, await makePluginCa());
  const deadAtStart = poolIssuerFactory(1, { workerModule: new URL('../pki/workers/dead-at-start-worker.js', import.meta.url) });
  const signer = signerFor(dir.path, new FakeClock(Date.now()), deadAtStart);
  t.after(() => signer.close());
  const seen: Array<string | undefined> = [];
  const broken = new Promise<void>((resolve) => {
    signer.onChange(() => {
      seen.push(signer.brokenReason);
      if (signer.brokenReason !== undefined) resolve();
    });
  });
  // The pool's workers do not hold the event loop open; this test's wait must.
  const keepAlive = setInterval(() => undefined, 1000);
  t.after(() => clearInterval(keepAlive));
  await signer.start();
  await broken;
  assert.deepEqual(seen, [undefined, 'every signing worker died'], 'told once at install, once when broken');
  assert.equal(signer.ready, false);
});
