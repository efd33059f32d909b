/**
 * The real install-cni daemon, as a child process, against a temp host tree: install, the
 * primary CNI overwriting the config, a deleted binary, a rotated token, fighting, SIGTERM
 * clean removal, and waiting for a primary config that appears late.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { chainState, jsonEqual, type JsonValue } from '../../../src/cni/install/index.js';
import { CONFORMANCE, DaemonProcess, TREE_ENTRY, makeHostTree, treeEnv, waitFor, type HostTree } from './host-tree.js';

const PRIMARY = '10-calico.conflist';
const original = (): string => readFileSync(CONFORMANCE + 'list.conflist', 'utf8');

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

function installedIn(tree: HostTree, name = PRIMARY): boolean {
  const v = readJson(join(tree.netDir, name));
  try {
    return v !== undefined && chainState(v, TREE_ENTRY) === 'installed';
  } catch {
    return false;
  }
}

function kubeconfigToken(tree: HostTree): string | undefined {
  try {
    const doc = parseYaml(readFileSync(join(tree.runDir, 'istio-cni-kubeconfig'), 'utf8')) as { users: Array<{ user: { token: string } }> };
    return doc.users[0]?.user.token;
  } catch {
    return undefined;
  }
}

function binaryIntact(tree: HostTree, name: string): boolean {
  try {
    return readFileSync(join(tree.binDir, name)).equals(tree.binaries[name]!) && (statSync(join(tree.binDir, name)).mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

test('install, repair what others undo, rotate the token, and remove everything on SIGTERM', async (t) => {
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, PRIMARY), original(), { mode: 0o640 });
  // A temp file a crashed earlier run left behind.
  writeFileSync(join(tree.binDir, '.istio-cni.certbroker-tmp-1-deadbeef'), 'half a binary');
  const daemon = new DaemonProcess(treeEnv(tree, { UNINSTALL_ON_EXIT: 'always', FIGHT_THRESHOLD: '3', FIGHT_WINDOW_SECONDS: '600' }));
  t.after(() => daemon.stop('SIGKILL'));

  // Installed: ready, binaries, kubeconfig (0600), config chained (mode kept).
  await waitFor(async () => (await daemon.get('/readyz')).status === 200, 'ready', daemon);
  assert.ok(binaryIntact(tree, 'istio-cni') && binaryIntact(tree, 'istio-iptables'));
  assert.ok(!existsSync(join(tree.binDir, '.istio-cni.certbroker-tmp-1-deadbeef')), 'stale temp removed');
  assert.equal(statSync(join(tree.runDir, 'istio-cni-kubeconfig')).mode & 0o777, 0o600);
  assert.equal(kubeconfigToken(tree), 'token-one');
  assert.ok(installedIn(tree));
  assert.equal(statSync(join(tree.netDir, PRIMARY)).mode & 0o777, 0o640);
  const health = await daemon.get('/healthz');
  assert.equal(health.status, 200);

  // The primary CNI rewrites its config (atomically, as CNIs do) -> re-inserted.
  const rewrite = () => {
    writeFileSync(join(tree.netDir, `.${PRIMARY}.tmp`), original(), { mode: 0o640 });
    renameSync(join(tree.netDir, `.${PRIMARY}.tmp`), join(tree.netDir, PRIMARY));
  };
  rewrite();
  await waitFor(() => daemon.hasLog('CNI config lost our entry; re-inserted'), 're-insert log', daemon);
  await waitFor(() => installedIn(tree), 're-inserted entry', daemon);

  // Keep rewriting: the daemon notices it is fighting.
  for (let i = 0; i < 2; i++) {
    const before = daemon.countLogs('CNI config lost our entry; re-inserted');
    rewrite();
    await waitFor(() => daemon.countLogs('CNI config lost our entry; re-inserted') > before, `re-insert ${i + 2}`, daemon);
  }
  await waitFor(() => daemon.hasLog('fighting another writer: it keeps undoing our change'), 'fight warning', daemon);
  await waitFor(() => installedIn(tree), 'entry after fight', daemon);

  // A binary deleted -> restored; one overwritten -> restored.
  unlinkSync(join(tree.binDir, 'istio-cni'));
  await waitFor(() => binaryIntact(tree, 'istio-cni'), 'istio-cni restored', daemon);
  writeFileSync(join(tree.binDir, 'istio-iptables'), 'not ours');
  await waitFor(() => binaryIntact(tree, 'istio-iptables'), 'istio-iptables restored', daemon);

  // Token rotated (projected volumes swap files atomically) -> kubeconfig rewritten.
  writeFileSync(join(tree.saDir, '.token.new'), 'token-two');
  renameSync(join(tree.saDir, '.token.new'), join(tree.saDir, 'token'));
  await waitFor(() => kubeconfigToken(tree) === 'token-two', 'kubeconfig with the new token', daemon);
  assert.equal(statSync(join(tree.runDir, 'istio-cni-kubeconfig')).mode & 0o777, 0o600);
  // Kubeconfig deleted -> rewritten.
  unlinkSync(join(tree.runDir, 'istio-cni-kubeconfig'));
  await waitFor(() => kubeconfigToken(tree) === 'token-two', 'kubeconfig restored', daemon);

  const metrics = await daemon.get('/metrics');
  assert.match(metrics.body, /certbroker_install_cni_repairs_total\{object="config:10-calico.conflist"\} [3-9]/);
  assert.match(metrics.body, /certbroker_install_cni_repairs_total\{object="binary:istio-cni"\} [1-9]/);
  assert.match(metrics.body, /certbroker_install_cni_fight_warnings_total/);
  // Logs never carry the token.
  assert.ok(!daemon.rawStderr.some((l) => l.includes('token-one') || l.includes('token-two')));

  // SIGTERM -> our entry, the kubeconfig and the binaries are gone; the primary is intact.
  const exit = await daemon.stop('SIGTERM');
  assert.equal(exit.code, 0, daemon.describe());
  assert.ok(jsonEqual(readJson(join(tree.netDir, PRIMARY)) as JsonValue, JSON.parse(original()) as JsonValue));
  assert.equal(statSync(join(tree.netDir, PRIMARY)).mode & 0o777, 0o640);
  assert.ok(!existsSync(join(tree.runDir, 'istio-cni-kubeconfig')));
  assert.ok(!existsSync(join(tree.binDir, 'istio-cni')));
  assert.ok(!existsSync(join(tree.binDir, 'istio-iptables')));
});

test('waits for a primary config, wraps a lone .conf, and leaves everything on SIGTERM when told to keep it', async (t) => {
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  writeFileSync(join(tree.netDir, '00-broken.conflist'), '{');
  const daemon = new DaemonProcess(treeEnv(tree, { UNINSTALL_ON_EXIT: 'never' }));
  t.after(() => daemon.stop('SIGKILL'));

  await waitFor(() => daemon.hasLog('waiting for the primary CNI config'), 'waiting log', daemon);
  const notReady = await daemon.get('/readyz');
  assert.equal(notReady.status, 503);
  assert.match(notReady.body, /no valid \.conf\/\.conflist/);

  writeFileSync(join(tree.netDir, '10-bridge.conf'), readFileSync(CONFORMANCE + 'bridge.conf'));
  await waitFor(async () => (await daemon.get('/readyz')).status === 200, 'ready', daemon);
  assert.ok(!existsSync(join(tree.netDir, '10-bridge.conf')), 'the lone .conf was replaced by a .conflist');
  const golden = readJson(CONFORMANCE + 'bridge.conf.golden') as { plugins: JsonValue[] };
  const written = readJson(join(tree.netDir, '10-bridge.conflist')) as { plugins: JsonValue[] };
  assert.ok(jsonEqual(written.plugins[0], golden.plugins[0]!));
  assert.ok(installedIn(tree, '10-bridge.conflist'));
  assert.ok(existsSync(join(tree.netDir, '00-broken.conflist')), 'unparseable files are skipped, not touched');

  const exit = await daemon.stop('SIGTERM');
  assert.equal(exit.code, 0, daemon.describe());
  assert.ok(daemon.hasLog('leaving the plugin installed'));
  assert.ok(installedIn(tree, '10-bridge.conflist'));
  assert.ok(existsSync(join(tree.runDir, 'istio-cni-kubeconfig')));
  assert.ok(binaryIntact(tree, 'istio-cni'));
});

test('bad configuration is refused at start with every problem listed', async () => {
  const tree = makeHostTree();
  try {
    const daemon = new DaemonProcess(
      treeEnv(tree, { KUBECONFIG_MODE: 'rw', MOUNTED_CNI_NET_DIR: 'relative/dir', RESYNC_INTERVAL_SECONDS: '0', UNINSTALL_ON_EXIT: 'sometimes' }),
    );
    const exit = await daemon.exited;
    assert.equal(exit.code, 1);
    const fatal = daemon.rawStderr.join('\n');
    for (const name of ['KUBECONFIG_MODE', 'MOUNTED_CNI_NET_DIR', 'RESYNC_INTERVAL_SECONDS', 'UNINSTALL_ON_EXIT']) assert.match(fatal, new RegExp(name));
  } finally {
    tree.cleanup();
  }
});
