/**
 * The installer in-process against a temp host tree, with the other writer acting at exact
 * moments through the compare-and-swap's commit hook (right before its last check, and right
 * after its rename): a rewrite between our read and our rename is never overwritten; text written
 * into the file we replace as we replace it is carried over. And the primary-file rule: with the
 * primary briefly empty or gone, no other file is edited, converted or renamed; uninstall puts the
 * primary CNI's own bytes back (a lone .conf included) and touches nothing it did not chain into.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, existsSync, ftruncateSync, openSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Installer, chainPlugin, loadInstallConfig, type InstallerOptions, type JsonObject } from '../../../src/cni/install/index.js';
import { makeHostTree, treeEnv, type HostTree } from './host-tree.js';

const PRIMARY = '10-calico.conflist';
const LOOPBACK = '99-loopback.conf';
const LOOPBACK_TEXT = '{"cniVersion":"1.0.0","name":"lo","type":"loopback"}\n';

const calico = (revision: string): string =>
  JSON.stringify({ name: 'k8s-pod-network', cniVersion: '0.3.1', plugins: [{ type: 'calico', revision }, { type: 'portmap', snat: true }] });

interface Setup {
  readonly tree: HostTree;
  readonly installer: Installer;
  readonly conflicts: string[];
  readonly gaveUp: string[];
  readonly clock: { now: number };
  /** Replaced by a test to act at a commit stage. */
  hook: NonNullable<InstallerOptions['onCommit']> | undefined;
}

function setup(t: { after(fn: () => void): void }, extra: Record<string, string> = {}): Setup {
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  const config = loadInstallConfig(treeEnv(tree, extra));
  const s: Setup = {
    tree,
    conflicts: [],
    gaveUp: [],
    clock: { now: 1_000_000 },
    hook: undefined,
    installer: undefined as unknown as Installer,
  };
  const options: InstallerOptions = {
    now: () => s.clock.now,
    events: { conflict: (file, reason) => s.conflicts.push(`${file}: ${reason}`), gaveUpWaiting: (file) => s.gaveUp.push(file) },
    onCommit: (stage, path) => s.hook?.(stage, path),
  };
  (s as { installer: Installer }).installer = new Installer(config, options);
  return s;
}

const read = (tree: HostTree, name: string): string => readFileSync(join(tree.netDir, name), 'utf8');
const chainedFrom = (s: Setup, text: string): JsonObject => chainPlugin(JSON.parse(text), s.installer.pluginEntry);

function atomicWrite(tree: HostTree, name: string, text: string, mode = 0o644): void {
  writeFileSync(join(tree.netDir, `.${name}.writer`), text, { mode });
  renameSync(join(tree.netDir, `.${name}.writer`), join(tree.netDir, name));
}

/** Every file in the net dir with its bytes and inode. */
function listing(tree: HostTree): Record<string, { text: string; ino: number }> {
  const out: Record<string, { text: string; ino: number }> = {};
  for (const name of readdirSync(tree.netDir)) out[name] = { text: read(tree, name), ino: statSync(join(tree.netDir, name)).ino };
  return out;
}

test('a rewrite between our read and our rename is never overwritten: the pass reads again and chains the new content', async (t) => {
  for (const how of ['rename', 'in place', 'in place, same size'] as const) {
    const s = setup(t);
    atomicWrite(s.tree, PRIMARY, calico('v1'));
    let fired = 0;
    s.hook = (stage) => {
      if (stage !== 'before-rename' || fired++ > 0) return;
      // The primary CNI writes v2 while we hold a chained v1 ready to rename.
      if (how === 'rename') atomicWrite(s.tree, PRIMARY, calico('v2'));
      else writeFileSync(join(s.tree.netDir, PRIMARY), calico(how === 'in place' ? 'v2-longer' : 'v9'));
    };
    const out = await s.installer.ensureConfig();
    assert.deepStrictEqual(out, { state: 'written', file: PRIMARY, previous: 'missing' }, how);
    const latest = how === 'rename' ? 'v2' : how === 'in place' ? 'v2-longer' : 'v9';
    assert.deepStrictEqual(JSON.parse(read(s.tree, PRIMARY)), chainedFrom(s, calico(latest)), how);
    assert.equal(s.conflicts.length, 1, `${how}: ${s.conflicts.join(' | ')}`);
    assert.deepStrictEqual(await s.installer.ensureConfig(), { state: 'unchanged', file: PRIMARY }, how);
  }
});

test('text written into the file as we replace it (a writer that opened it before our rename) is carried over', async (t) => {
  const s = setup(t);
  atomicWrite(s.tree, PRIMARY, calico('v1'));
  // The writer has the file open (as a truncate + write does between its open and its write).
  const fd = openSync(join(s.tree.netDir, PRIMARY), 'r+');
  t.after(() => closeSync(fd));
  let fired = 0;
  s.hook = (stage) => {
    if (stage !== 'after-rename' || fired++ > 0) return;
    ftruncateSync(fd, 0);
    writeSync(fd, calico('v2'), 0);
  };
  assert.equal((await s.installer.ensureConfig()).state, 'written');
  assert.deepStrictEqual(JSON.parse(read(s.tree, PRIMARY)), chainedFrom(s, calico('v2')));
  assert.match(s.conflicts.join(' | '), /written into as we replaced it/);
});

test('a file that keeps changing under every attempt ends the pass as busy, with nothing of ours over the writer', async (t) => {
  const s = setup(t);
  atomicWrite(s.tree, PRIMARY, calico('v0'));
  let n = 0;
  s.hook = (stage) => {
    if (stage === 'before-rename') atomicWrite(s.tree, PRIMARY, calico(`v${++n}`));
  };
  const out = await s.installer.ensureConfig();
  assert.equal(out.state, 'busy');
  assert.equal(read(s.tree, PRIMARY), calico(`v${n}`), 'the writer’s latest is on disk, untouched');
  s.hook = undefined;
  assert.equal((await s.installer.ensureConfig()).state, 'written');
  assert.deepStrictEqual(JSON.parse(read(s.tree, PRIMARY)), chainedFrom(s, calico(`v${n}`)));
});

test('while the primary is briefly empty or gone no other file is edited; past the wait limit the next valid file is the primary', async (t) => {
  const s = setup(t, { PRIMARY_CONFIG_WAIT_SECONDS: '30' });
  atomicWrite(s.tree, PRIMARY, calico('v1'));
  writeFileSync(join(s.tree.netDir, LOOPBACK), LOOPBACK_TEXT);
  writeFileSync(join(s.tree.netDir, 'calico-kubeconfig'), 'kubeconfig');
  await s.installer.ensureBinaries();
  await s.installer.ensureKubeconfig();
  assert.equal((await s.installer.ensureConfig()).state, 'written');
  const before = listing(s.tree);

  writeFileSync(join(s.tree.netDir, PRIMARY), ''); // truncated, the write still to come
  let out = await s.installer.ensureConfig();
  assert.equal(out.state, 'waiting');
  assert.match((out as { reason: string }).reason, /10-calico\.conflist is empty/);
  assert.match(s.installer.problem() ?? '', /10-calico\.conflist is empty/);
  unlinkSync(join(s.tree.netDir, PRIMARY)); // deleted, to be written again
  out = await s.installer.ensureConfig();
  assert.match((out as { reason: string }).reason, /the primary 10-calico\.conflist is gone; waiting/);
  writeFileSync(join(s.tree.netDir, PRIMARY), '{"name": "k8s-pod-'); // half written
  out = await s.installer.ensureConfig();
  assert.match((out as { reason: string }).reason, /the primary 10-calico\.conflist is not loadable/);
  const { [PRIMARY]: _primary, ...others } = before;
  const { [PRIMARY]: _now, ...othersNow } = listing(s.tree);
  assert.deepStrictEqual(othersNow, others, 'the loopback config and the kubeconfig are untouched');

  // The write completes: chained again.
  atomicWrite(s.tree, PRIMARY, calico('v2'));
  assert.equal((await s.installer.ensureConfig()).state, 'written');
  assert.deepStrictEqual(JSON.parse(read(s.tree, PRIMARY)), chainedFrom(s, calico('v2')));

  // The primary CNI goes away for good: after PRIMARY_CONFIG_WAIT_SECONDS the runtime's choice is ours.
  unlinkSync(join(s.tree.netDir, PRIMARY));
  assert.equal((await s.installer.ensureConfig()).state, 'waiting');
  s.clock.now += 29_000;
  assert.equal((await s.installer.ensureConfig()).state, 'waiting');
  s.clock.now += 1_000;
  assert.deepStrictEqual(await s.installer.ensureConfig(), { state: 'written', file: '99-loopback.conflist', previous: 'missing' });
  assert.deepStrictEqual(s.gaveUp, [PRIMARY]);
});

test('a fresh process that finds an earlier file empty waits instead of editing a later one', async (t) => {
  const s = setup(t);
  writeFileSync(join(s.tree.netDir, PRIMARY), '');
  writeFileSync(join(s.tree.netDir, LOOPBACK), LOOPBACK_TEXT);
  const out = await s.installer.ensureConfig();
  assert.equal(out.state, 'waiting');
  assert.equal(read(s.tree, LOOPBACK), LOOPBACK_TEXT);
  assert.ok(!existsSync(join(s.tree.netDir, '99-loopback.conflist')));
});

test('uninstall, also from a later process, puts back the primary CNI’s own bytes and leaves every other file alone', async (t) => {
  const s = setup(t);
  const listText = '{ "name": "k8s-pod-network",\n\t"cniVersion": "0.3.1", "plugins": [ {"type": "calico"} ] }';
  writeFileSync(join(s.tree.netDir, PRIMARY), listText, { mode: 0o640 });
  // Someone else's file with an istio-cni entry in it (not ours: we never chained into it).
  const foreign = JSON.stringify({ name: 'x', cniVersion: '1.0.0', plugins: [{ type: 'bridge' }, { type: 'istio-cni' }] });
  writeFileSync(join(s.tree.netDir, '50-foreign.conflist'), foreign);
  writeFileSync(join(s.tree.netDir, LOOPBACK), LOOPBACK_TEXT);
  await s.installer.ensureBinaries();
  await s.installer.ensureKubeconfig();
  assert.equal((await s.installer.ensureConfig()).state, 'written');
  // The primary CNI rewrites its file (our entry dropped); we chain the new bytes.
  const v2 = listText.replace('"calico"', '"calico", "mtu": 1400');
  atomicWrite(s.tree, PRIMARY, v2, 0o640);
  assert.equal((await s.installer.ensureConfig()).state, 'written');

  // A later process (after an upgrade) uninstalls, knowing only what the state file says.
  const later = new Installer(loadInstallConfig(treeEnv(s.tree)));
  await later.uninstall();
  assert.equal(read(s.tree, PRIMARY), v2, 'exactly the bytes the primary CNI last wrote');
  assert.equal(statSync(join(s.tree.netDir, PRIMARY)).mode & 0o777, 0o640);
  assert.equal(read(s.tree, '50-foreign.conflist'), foreign);
  assert.equal(read(s.tree, LOOPBACK), LOOPBACK_TEXT);
  assert.deepStrictEqual(readdirSync(s.tree.netDir).sort(), [PRIMARY, '50-foreign.conflist', LOOPBACK].sort());
  assert.deepStrictEqual(readdirSync(s.tree.runDir), [], 'kubeconfig and state file gone');
});

test('a lone .conf we turned into a .conflist comes back as the same .conf on uninstall', async (t) => {
  const s = setup(t);
  const conf = '{\n    "cniVersion": "0.4.0", "name": "mynet", "type": "bridge", "bridge": "cni0"\n}\n';
  writeFileSync(join(s.tree.netDir, '10-bridge.conf'), conf);
  assert.deepStrictEqual(await s.installer.ensureConfig(), { state: 'written', file: '10-bridge.conflist', previous: 'missing' });
  assert.ok(!existsSync(join(s.tree.netDir, '10-bridge.conf')));
  assert.deepStrictEqual(await s.installer.ensureConfig(), { state: 'unchanged', file: '10-bridge.conflist' });
  await new Installer(loadInstallConfig(treeEnv(s.tree))).uninstall();
  assert.deepStrictEqual(readdirSync(s.tree.netDir), ['10-bridge.conf']);
  assert.equal(read(s.tree, '10-bridge.conf'), conf);
});

test('a .conf is not turned into a .conflist over someone else’s file of that name', async (t) => {
  const s = setup(t);
  const theirs = JSON.stringify({ name: 'other', cniVersion: '1.0.0', plugins: [{ type: 'ptp' }] });
  writeFileSync(join(s.tree.netDir, '10-bridge.conf'), '{"cniVersion": "0.4.0", "name": "mynet", "type": "bridge"}');
  writeFileSync(join(s.tree.netDir, '10-bridge.conflist'), theirs);
  const out = await s.installer.ensureConfig();
  assert.equal(out.state, 'waiting');
  assert.match((out as { reason: string }).reason, /10-bridge\.conflist exists and is not ours/);
  assert.equal(read(s.tree, '10-bridge.conflist'), theirs);
});

test('a primary that is a symlink is read through and replaced by the chained file, as before', async (t) => {
  const s = setup(t);
  const real = join(s.tree.root, 'calico.conflist');
  writeFileSync(real, calico('v1'));
  symlinkSync(real, join(s.tree.netDir, PRIMARY));
  assert.equal((await s.installer.ensureConfig()).state, 'written');
  assert.deepStrictEqual(JSON.parse(read(s.tree, PRIMARY)), chainedFrom(s, calico('v1')));
  assert.equal(readFileSync(real, 'utf8'), calico('v1'), 'the link target is not written through');
  assert.deepStrictEqual(s.conflicts, []);
});
