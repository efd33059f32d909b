/**
 * An external signer's roots file followed while the CA runs (signers/roots-file.ts), on a fake
 * clock: a change is taken at the next poll and told, garbage or an unreadable file keeps the
 * roots in use; the step-ca signer's `roots()` (the answers' last element) and its change event
 * follow the file from old root -> both -> new root without a restart.
 */
import assert from 'node:assert/strict';
import { rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RootsFile, StepCaSigner } from '../../src/ca/index.js';
import { createLogger } from '../../src/core/log.js';
import { createRootCa, type CaCertificate } from '../../src/pki/index.js';
import { FakeClock } from '../support/fake-clock.js';
import { tempDirSync, removeTempDir } from '../support/scratch.js';
import { makeProvisionerKey } from '../support/step-ca.js';

const POLL_MS = 1000;
let dir: string;
let a: CaCertificate;
let b: CaCertificate;

before(async () => {
  dir = tempDirSync('roots-file-');
  a = await createRootCa({ subject: 'CN=root a', ttlSeconds: 86400 });
  b = await createRootCa({ subject: 'CN=root b', ttlSeconds: 86400 });
});

after(async () => {
  await removeTempDir(dir);
});

/** Writes `text` as the kubelet updates a mounted file (a rename: never half-written). */
async function put(path: string, text: string): Promise<void> {
  await writeFile(`${path}.tmp`, text);
  await rename(`${path}.tmp`, path);
}

/** One poll: the sleep is armed, advance past it, wait for the read to finish (state, not time). */
async function poll(clock: FakeClock, done: () => boolean): Promise<void> {
  await clock.waitForTimers(1);
  await clock.advance(POLL_MS);
  for (let i = 0; i < 400 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
}

describe('RootsFile', () => {
  it('takes a changed file at the next poll, keeps the roots in use on garbage or a missing file', async () => {
    const path = join(dir, 'roots.pem');
    await put(path, a.pem);
    const clock = new FakeClock();
    const logs: string[] = [];
    const file = new RootsFile({ path, clock, logger: createLogger({ level: 'debug', sink: (l) => logs.push(l) }), pollIntervalMs: POLL_MS }, a.pem);
    const seen: number[] = [];
    file.watch((roots) => seen.push(roots.certs.length));
    try {
      await put(path, a.pem + b.pem);
      await poll(clock, () => seen.length === 1);
      assert.deepEqual(seen, [2]);
      assert.equal(file.roots.pem.match(/BEGIN CERTIFICATE/g)?.length, 2);
      await put(path, 'not a certificate');
      await poll(clock, () => logs.some((l) => l.includes('holds no usable certificate')));
      await rm(path);
      await poll(clock, () => logs.some((l) => l.includes('not readable')));
      assert.deepEqual(seen, [2], 'nothing taken from garbage or a missing file');
      assert.equal(file.roots.certs.length, 2);
      await put(path, b.pem);
      await poll(clock, () => seen.length === 2);
      assert.deepEqual(seen, [2, 1]);
      assert.equal(file.roots.pem, file.roots.pems[0]);
    } finally {
      file.close();
    }
  });

  it("the step-ca signer's roots follow its root file: old -> both -> new, each told to the CA", async () => {
    const rootFile = join(dir, 'step-ca-root.pem');
    const keyFile = join(dir, 'provisioner.json');
    await put(rootFile, a.pem);
    await writeFile(keyFile, JSON.stringify((await makeProvisionerKey()).privateJwk));
    const clock = new FakeClock();
    const signer = new StepCaSigner({
      // Nothing listens there: the signer only logs that step-ca does not answer yet.
      url: 'https://127.0.0.1:9',
      rootFile,
      provisioner: 'certbroker',
      provisionerKeyFile: keyFile,
      rootsPollIntervalMs: POLL_MS,
      clock,
      logger: createLogger({ level: 'error', sink: () => undefined }),
    });
    let changes = 0;
    signer.onChange(() => changes++);
    try {
      await signer.start();
      assert.equal(signer.roots().length, 1);
      const started = changes;
      await put(rootFile, a.pem + b.pem);
      await poll(clock, () => signer.roots().length === 2);
      assert.equal(signer.roots().length, 2, 'both roots go out during the overlap');
      assert.equal(changes, started + 1);
      await put(rootFile, b.pem);
      await poll(clock, () => signer.roots().length === 1);
      assert.equal(signer.roots()[0]!.trim(), b.pem.trim());
      assert.equal(changes, started + 2);
    } finally {
      await signer.close();
    }
  });
});
