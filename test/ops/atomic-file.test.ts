import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyFileAtomic, isTempName, removeStaleTemps, writeFileAtomic } from '../../../src/cni/install/fs-atomic.js';

function dir(t: { after(fn: () => void): void }): string {
  const d = mkdtempSync(join(tmpdir(), 'fs-atomic-'));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

test('writeFileAtomic replaces the file with the exact mode, umask or not, and leaves no temp', async (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'f'), 'old', { mode: 0o644 });
  const umask = process.umask(0o077);
  try {
    await writeFileAtomic({ dir: d, name: 'f' }, 'new', 0o640);
  } finally {
    process.umask(umask);
  }
  assert.equal(readFileSync(join(d, 'f'), 'utf8'), 'new');
  assert.equal(statSync(join(d, 'f')).mode & 0o777, 0o640);
  assert.deepStrictEqual(readdirSync(d), ['f']);
});

test('a failed write leaves the old file and no temp behind', async (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'f'), 'old');
  mkdirSync(join(d, 'f.d'));
  // Renaming a file over a directory fails (EISDIR): the target stays, the temp goes.
  await assert.rejects(writeFileAtomic({ dir: d, name: 'f.d' }, 'x', 0o644));
  assert.deepStrictEqual(readdirSync(d).sort(), ['f', 'f.d']);
  assert.equal(readFileSync(join(d, 'f'), 'utf8'), 'old');
});

test('copyFileAtomic copies bytes, mode and mtime', async (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'src'), Buffer.from([1, 2, 3, 4]));
  chmodSync(join(d, 'src'), 0o600);
  mkdirSync(join(d, 'bin'));
  await copyFileAtomic(join(d, 'src'), { dir: join(d, 'bin'), name: 'tool' }, { mode: 0o755, mtimeMs: Date.UTC(2025, 0, 1) });
  const st = statSync(join(d, 'bin', 'tool'));
  assert.deepStrictEqual([...readFileSync(join(d, 'bin', 'tool'))], [1, 2, 3, 4]);
  assert.equal(st.mode & 0o777, 0o755);
  assert.equal(Math.round(st.mtimeMs), Date.UTC(2025, 0, 1));
  await assert.rejects(copyFileAtomic(join(d, 'missing'), { dir: join(d, 'bin'), name: 'x' }, { mode: 0o755, mtimeMs: 0 }));
  assert.deepStrictEqual(readdirSync(join(d, 'bin')), ['tool']);
});

test('stale temps are recognised and removed; other dot files are not', async (t) => {
  const d = dir(t);
  for (const n of ['.istio-cni.certbroker-tmp-12-ab', '.10-calico.conflist.certbroker-tmp-3-cd', '.hidden', 'istio-cni']) writeFileSync(join(d, n), '');
  assert.ok(isTempName('.istio-cni.certbroker-tmp-12-ab'));
  assert.ok(!isTempName('istio-cni.certbroker-tmp-12-ab'), 'ours always start with a dot');
  assert.deepStrictEqual((await removeStaleTemps(d)).sort(), ['.10-calico.conflist.certbroker-tmp-3-cd', '.istio-cni.certbroker-tmp-12-ab']);
  assert.deepStrictEqual(readdirSync(d).sort(), ['.hidden', 'istio-cni']);
  assert.deepStrictEqual(await removeStaleTemps(join(d, 'nope')), []);
});
