/**
 * The filesystem installer in-process against a temp host tree: the modes and edge cases
 * the daemon tests do not walk through (istio-owned file, configured name, readiness
 * reasons, uninstall of every config we touched, custom kubeconfig mode, missing sources).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, readdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Installer, loadInstallConfig, chainState, type InstallConfig } from '../../../src/cni/install/index.js';
import { CONFORMANCE, makeHostTree, treeEnv, type HostTree } from './host-tree.js';

function setup(extra: Record<string, string> = {}): { tree: HostTree; config: InstallConfig; installer: Installer } {
  const tree = makeHostTree();
  const config = loadInstallConfig(treeEnv(tree, extra));
  return { tree, config, installer: new Installer(config) };
}

const json = (path: string): unknown => JSON.parse(readFileSync(path, 'utf8'));

test('istio-owned mode writes its own file from the primary and never edits the primary', async (t) => {
  const { tree, installer } = setup({ ISTIO_OWNED_CNI_CONFIG: 'true', AMBIENT_ENABLED: 'true', POD_NAMESPACE: 'my-namespace', CNI_AGENT_RUN_DIR: '/path/to/kubeconfig', PLUGIN_LOG_LEVEL: 'debug' });
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, '10-bridge.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  await installer.ensureBinaries();
  await installer.ensureKubeconfig();
  assert.match(installer.problem() ?? '', /02-istio-cni\.conflist is missing/);
  const out = await installer.ensureConfig();
  assert.deepStrictEqual(out, { state: 'written', file: '02-istio-cni.conflist', previous: 'missing' });
  assert.deepStrictEqual(json(join(tree.netDir, '02-istio-cni.conflist')), json(CONFORMANCE + 'istio-owned.conflist.golden'));
  assert.deepStrictEqual(json(join(tree.netDir, '10-bridge.conflist')), json(CONFORMANCE + 'list.conflist'), 'primary untouched');
  assert.equal(installer.problem(), undefined);
  assert.deepStrictEqual(await installer.ensureConfig(), { state: 'unchanged', file: '02-istio-cni.conflist' });

  // The primary changes -> our file follows it.
  writeFileSync(join(tree.netDir, '10-bridge.conflist'), readFileSync(CONFORMANCE + 'list-no-istio.conflist'));
  const primary = json(join(tree.netDir, '10-bridge.conflist')) as { plugins: unknown[] };
  primary.plugins.pop();
  writeFileSync(join(tree.netDir, '10-bridge.conflist'), JSON.stringify(primary));
  assert.match(installer.problem() ?? '', /out of date/);
  assert.equal((await installer.ensureConfig()).state, 'written');
  assert.equal((json(join(tree.netDir, '02-istio-cni.conflist')) as { plugins: unknown[] }).plugins.length, 2);

  await installer.uninstall();
  assert.ok(!existsSync(join(tree.netDir, '02-istio-cni.conflist')));
  assert.ok(existsSync(join(tree.netDir, '10-bridge.conflist')));
});

test('istio-owned file that sorts after the primary is reported: the runtime would not use it', async (t) => {
  const { tree, installer } = setup({ ISTIO_OWNED_CNI_CONFIG: 'true', ISTIO_OWNED_CNI_CONF_FILENAME: '99-istio-cni.conflist' });
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, '10-bridge.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  await installer.ensureBinaries();
  await installer.ensureKubeconfig();
  await installer.ensureConfig();
  assert.match(installer.problem() ?? '', /sorts after the primary/);
});

test('a configured name is used even when another file sorts first', async (t) => {
  const { tree, installer } = setup({ CNI_CONF_NAME: '20-mine.conflist' });
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, '10-other.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  assert.equal((await installer.ensureConfig()).state, 'waiting');
  writeFileSync(join(tree.netDir, '20-mine.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  assert.equal((await installer.ensureConfig()).state, 'written');
  assert.equal(chainState(json(join(tree.netDir, '20-mine.conflist')), installer.pluginEntry), 'installed');
  assert.equal(chainState(json(join(tree.netDir, '10-other.conflist')), installer.pluginEntry), 'missing');
});

test('readiness names what is wrong, in order: binaries, kubeconfig, config', async (t) => {
  const { tree, installer } = setup();
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, '10-a.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  assert.match(installer.problem() ?? '', /binary istio-cni is missing/);
  await installer.ensureBinaries();
  assert.match(installer.problem() ?? '', /kubeconfig is missing/);
  await installer.ensureKubeconfig();
  assert.match(installer.problem() ?? '', /istio-cni entry missing in 10-a\.conflist/);
  await installer.ensureConfig();
  assert.equal(installer.problem(), undefined);
  // Someone appends a plugin after ours: not last any more -> outdated until repaired.
  const v = json(join(tree.netDir, '10-a.conflist')) as { plugins: unknown[] };
  v.plugins.push({ type: 'portmap' });
  writeFileSync(join(tree.netDir, '10-a.conflist'), JSON.stringify(v));
  assert.match(installer.problem() ?? '', /outdated/);
  await installer.ensureConfig();
  const after = json(join(tree.netDir, '10-a.conflist')) as { plugins: Array<{ type: string }> };
  assert.deepStrictEqual(after.plugins.map((p) => p.type), ['bridge', 'tuning', 'portmap', 'istio-cni']);
  // A binary made non-executable is not ours any more.
  writeFileSync(join(tree.binDir, 'istio-iptables'), tree.binaries['istio-iptables']!, { mode: 0o644 });
  assert.match(installer.problem() ?? '', /istio-iptables/);
});

test('uninstall cleans every config we chained into, not only the current primary', async (t) => {
  const { tree, installer } = setup();
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, '20-old.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  await installer.ensureConfig();
  // The primary CNI adds a new file that sorts first; we chain into it as well.
  writeFileSync(join(tree.netDir, '10-new.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  await installer.ensureConfig();
  await installer.uninstall();
  for (const name of ['10-new.conflist', '20-old.conflist']) {
    assert.deepStrictEqual(json(join(tree.netDir, name)), json(CONFORMANCE + 'list-no-istio.conflist'), name);
  }
});

test('kubeconfig mode is configurable; a missing token or CA is a coded error', async (t) => {
  const { tree, installer } = setup({ KUBECONFIG_MODE: '0640' });
  t.after(() => tree.cleanup());
  await installer.ensureKubeconfig();
  assert.equal(statSync(installer.kubeconfigPath).mode & 0o777, 0o640);
  assert.equal(await installer.ensureKubeconfig(), false, 'unchanged -> not rewritten');
  unlinkSync(join(tree.saDir, 'ca.crt'));
  await assert.rejects(installer.ensureKubeconfig(), { code: 'ERR_KUBECONFIG_INPUT_INVALID' });
  unlinkSync(join(tree.saDir, 'token'));
  await assert.rejects(installer.ensureKubeconfig(), { code: 'ERR_KUBECONFIG_INPUT_INVALID' });
});

test('host files are replaced whole with their modes (binaries 0755 whatever the source, kubeconfig 0600, our config 0644 like the primary) under a strict umask, and no temp stays', async (t) => {
  const { tree, installer } = setup({ ISTIO_OWNED_CNI_CONFIG: 'true' });
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, '10-bridge.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  chmodSync(join(tree.netDir, '10-bridge.conflist'), 0o644);
  chmodSync(join(tree.srcDir, 'istio-cni'), 0o700);
  const umask = process.umask(0o077);
  try {
    await installer.ensureBinaries();
    await installer.ensureKubeconfig();
    await installer.ensureConfig();
  } finally {
    process.umask(umask);
  }
  const mode = (p: string) => statSync(p).mode & 0o777;
  for (const name of ['istio-cni', 'istio-iptables']) {
    assert.equal(mode(join(tree.binDir, name)), 0o755, name);
    assert.ok(readFileSync(join(tree.binDir, name)).equals(tree.binaries[name]!), name);
  }
  assert.equal(mode(installer.kubeconfigPath), 0o600);
  assert.equal(mode(join(tree.netDir, '02-istio-cni.conflist')), 0o644);
  for (const d of [tree.binDir, tree.netDir, tree.runDir]) assert.deepStrictEqual(readdirSync(d).filter((n) => n.startsWith('.')), [], d);
});

test('a missing source binary is ERR_CNI_BINARY_MISSING', async (t) => {
  const { tree, installer } = setup({ CNI_BINARIES: 'istio-cni,not-built' });
  t.after(() => tree.cleanup());
  await assert.rejects(installer.ensureBinaries(), { code: 'ERR_CNI_BINARY_MISSING' });
});
