/**
 * The one atomic file replacement: exact modes whatever the umask (0600 secrets, 0644 configs,
 * 0755 binaries), no temp left behind on success or failure, no writing through a symlink, a
 * copy that takes the given mode and mtime (never the source's mode), and crash leftovers found
 * by name. Its users' own views are in test/broker/fetch-files, test/pki/cacerts-dir and
 * test/cni/install (installer, daemon).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyFileAtomic, isTempName, removeStaleTemps, writeFileAtomic } from '../../src/ops/atomic-file.js';

function dir(t: { after(fn: () => void): void }): string {
  const d = mkdtempSync(join(tmpdir(), 'atomic-file-'));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

function underUmask<T>(mask: number, fn: () => Promise<T>): Promise<T> {
  const before = process.umask(mask);
  return fn().finally(() => process.umask(before));
}

test('writeFileAtomic replaces the file with exactly the mode asked for, under any umask, and leaves no temp', async (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'config'), 'old', { mode: 0o600 });
  for (const [mask, mode] of [[0o077, 0o644], [0o000, 0o600], [0o022, 0o640]] as const) {
    for (const sync of [false, true]) {
      await underUmask(mask, () => writeFileAtomic(join(d, 'config'), `new ${mode} ${sync}`, { mode, sync }));
      assert.equal(readFileSync(join(d, 'config'), 'utf8'), `new ${mode} ${sync}`);
      assert.equal(statSync(join(d, 'config')).mode & 0o777, mode, `mode ${mode.toString(8)} under umask ${mask.toString(8)}`);
    }
  }
  assert.deepEqual(readdirSync(d), ['config']);
});

test('a failed write leaves the old file and no temp behind', async (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'f'), 'old');
  mkdirSync(join(d, 'f.d'));
  // Renaming a file over a directory fails (EISDIR): the target stays, the temp goes.
  await assert.rejects(writeFileAtomic(join(d, 'f.d'), 'x', { mode: 0o644 }));
  assert.deepEqual(readdirSync(d).sort(), ['f', 'f.d']);
  assert.equal(readFileSync(join(d, 'f'), 'utf8'), 'old');
});

test('a symlink at the target is replaced by a file, the file it pointed to is untouched', async (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'victim'), 'untouched', { mode: 0o644 });
  symlinkSync(join(d, 'victim'), join(d, 'key.pem'));
  await writeFileAtomic(join(d, 'key.pem'), 'secret', { mode: 0o600 });
  assert.equal(readFileSync(join(d, 'victim'), 'utf8'), 'untouched');
  assert.ok(lstatSync(join(d, 'key.pem')).isFile());
  assert.equal(statSync(join(d, 'key.pem')).mode & 0o777, 0o600);
});

test('copyFileAtomic copies the bytes with the mode asked for (not the source\'s) and the mtime given', async (t) => {
  const d = dir(t);
  const bytes = Buffer.alloc(3 * 1024 * 1024 + 7, 0xa5); // more than one read of the stream
  writeFileSync(join(d, 'src'), bytes);
  chmodSync(join(d, 'src'), 0o777);
  mkdirSync(join(d, 'bin'));
  writeFileSync(join(d, 'bin', 'tool'), 'old binary', { mode: 0o700 });
  await underUmask(0o077, () => copyFileAtomic(join(d, 'src'), join(d, 'bin', 'tool'), { mode: 0o755, sync: true, mtimeMs: Date.UTC(2025, 0, 1) }));
  const st = statSync(join(d, 'bin', 'tool'));
  assert.ok(readFileSync(join(d, 'bin', 'tool')).equals(bytes));
  assert.equal(st.mode & 0o777, 0o755);
  assert.equal(Math.round(st.mtimeMs), Date.UTC(2025, 0, 1));
  await assert.rejects(copyFileAtomic(join(d, 'missing'), join(d, 'bin', 'x'), { mode: 0o755, mtimeMs: 0 }), (e: NodeJS.ErrnoException) => e.code === 'ENOENT');
  assert.deepEqual(readdirSync(join(d, 'bin')), ['tool'], 'no temp left by the failed copy');
});

test('temps are hidden, marked, and found after a crash; other dot files are not', async (t) => {
  const d = dir(t);
  for (const n of ['.istio-cni.certbroker-tmp-12-ab', '.10-calico.conflist.certbroker-tmp-3-cd', '.hidden', 'istio-cni', 'key.pem.tmp']) writeFileSync(join(d, n), '');
  assert.ok(isTempName('.istio-cni.certbroker-tmp-12-ab'));
  assert.ok(!isTempName('istio-cni.certbroker-tmp-12-ab'), 'ours always start with a dot');
  assert.deepEqual((await removeStaleTemps(d)).sort(), ['.10-calico.conflist.certbroker-tmp-3-cd', '.istio-cni.certbroker-tmp-12-ab']);
  assert.deepEqual(readdirSync(d).sort(), ['.hidden', 'istio-cni', 'key.pem.tmp']);
  assert.deepEqual(await removeStaleTemps(join(d, 'nope')), []);
});
