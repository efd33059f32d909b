/**
 * install-cni's SIGTERM decision against the devcluster, as the istio-cni service account
 * with the RBAC and the DaemonSet rendered from deploy/: while the DaemonSet exists and
 * still targets the node it is an upgrade (everything stays); when the DaemonSet stops
 * targeting the node or is deleted it is an uninstall (everything goes). The repair
 * controller runs in the same process (full `install-cni` wiring).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { chainState } from '../../../src/cni/install/index.js';
import { adminClient, createNode, createPod, serviceAccountToken, startCluster, type DevCluster } from '../../support/cluster.js';
import { findObject, identityObjects } from '../../deploy/manifests.js';
import { CONFORMANCE, DaemonProcess, TREE_ENTRY, makeHostTree, treeEnv, waitFor, type HostTree } from './host-tree.js';
import { kubectlMissing } from '../../support/tools.js';

const NS = 'istio-system';
const PRIMARY = '10-calico.conflist';
let cluster: DevCluster;
let tree: HostTree;
let kubeconfigPath: string;

/** The RBAC comes from `kubectl kustomize deploy/`. */
const skip = kubectlMissing();

before(async () => {
  if (skip) return;
  cluster = await startCluster({ simulateKubelet: false });
  await cluster.apply(await identityObjects());
  await cluster.apply([await findObject('DaemonSet', 'istio-cni-node')]);
  await createNode(cluster, { name: 'node-a', labels: { 'kubernetes.io/os': 'linux' } });
  const token = await serviceAccountToken(cluster, { namespace: NS, serviceAccountName: 'istio-cni' });
  tree = makeHostTree();
  kubeconfigPath = join(tree.root, 'install-cni-kubeconfig');
  writeFileSync(kubeconfigPath, cluster.kubeconfigYaml({ token }), { mode: 0o600 });
  writeFileSync(join(tree.netDir, PRIMARY), readFileSync(CONFORMANCE + 'list.conflist'));
});

after(async () => {
  await cluster?.close();
  tree?.cleanup();
});

function installed(): boolean {
  try {
    return chainState(JSON.parse(readFileSync(join(tree.netDir, PRIMARY), 'utf8')), TREE_ENTRY) === 'installed';
  } catch {
    return false;
  }
}

function everythingInPlace(): boolean {
  return installed() && existsSync(join(tree.runDir, 'istio-cni-kubeconfig')) && existsSync(join(tree.binDir, 'istio-cni')) && existsSync(join(tree.binDir, 'istio-iptables'));
}

function everythingGone(): boolean {
  const v = JSON.parse(readFileSync(join(tree.netDir, PRIMARY), 'utf8')) as unknown;
  return chainState(v, TREE_ENTRY) === 'missing' && !existsSync(join(tree.runDir, 'istio-cni-kubeconfig')) && !existsSync(join(tree.binDir, 'istio-cni'));
}

async function runUntilReady(extra: Record<string, string> = {}): Promise<DaemonProcess> {
  const daemon = new DaemonProcess(
    treeEnv(tree, { KUBECONFIG: kubeconfigPath, UNINSTALL_ON_EXIT: 'unless-upgrade', POD_NAMESPACE: NS, DAEMONSET_NAME: 'istio-cni-node', REPAIR_ENABLED: 'false', ...extra }),
  );
  await waitFor(async () => (await daemon.get('/readyz')).status === 200, 'ready', daemon);
  return daemon;
}

function decision(daemon: DaemonProcess): string {
  const rec = daemon.logs.find((l) => l.msg === 'leaving the plugin installed' || l.msg === 'uninstalling the plugin');
  return `${rec?.msg ?? '(none)'}: ${String(rec?.reason ?? '')}`;
}

test('DaemonSet still targets the node: SIGTERM is an upgrade, the plugin stays; repair runs alongside', { skip }, async (t) => {
  // A pod that started before the plugin: the repair controller in the same process deletes it.
  await createPod(cluster, { namespace: 'app', name: 'too-early', nodeName: 'node-a' });
  await adminClient(cluster).core.patchNamespacedPodStatus(
    {
      namespace: 'app',
      name: 'too-early',
      body: { status: { initContainerStatuses: [{ name: 'istio-validation', image: 'x', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 126, reason: 'Error' } } }] } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const daemon = await runUntilReady({ REPAIR_ENABLED: 'true', REPAIR_MODE: 'delete' });
  t.after(() => daemon.stop('SIGKILL'));
  await waitFor(async () => {
    try {
      await adminClient(cluster).core.readNamespacedPod({ namespace: 'app', name: 'too-early' });
      return false;
    } catch (err) {
      return (err as { code?: number }).code === 404;
    }
  }, 'too-early pod deleted by repair', daemon);
  // Repair's pod watch is on install-cni's /metrics (its only health signal: readiness is the plugin's).
  const metrics = (await daemon.get('/metrics')).body;
  assert.match(metrics, /^certbroker_informer_ready\{resource="pods",cluster=""\} 1$/m);
  assert.match(metrics, /^certbroker_informer_last_event_age_seconds\{resource="pods",cluster=""\} [\d.e-]+$/m);

  const exit = await daemon.stop('SIGTERM');
  assert.equal(exit.code, 0, daemon.describe());
  assert.match(decision(daemon), /^leaving the plugin installed: DaemonSet istio-cni-node still targets node node-a \(upgrade\)/);
  assert.ok(everythingInPlace());
});

test('DaemonSet no longer selects the node: SIGTERM uninstalls', { skip }, async (t) => {
  const daemon = await runUntilReady();
  t.after(() => daemon.stop('SIGKILL'));
  await adminClient(cluster).apps.patchNamespacedDaemonSet(
    { namespace: NS, name: 'istio-cni-node', body: { spec: { template: { spec: { nodeSelector: { 'kubernetes.io/os': 'linux', pool: 'gpu' } } } } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
  const exit = await daemon.stop('SIGTERM');
  assert.equal(exit.code, 0, daemon.describe());
  assert.match(decision(daemon), /^uninstalling the plugin: DaemonSet istio-cni-node no longer targets node node-a/);
  assert.ok(everythingGone());
});

test('DaemonSet deleted: SIGTERM uninstalls', { skip }, async (t) => {
  const daemon = await runUntilReady();
  t.after(() => daemon.stop('SIGKILL'));
  assert.ok(everythingInPlace());
  await adminClient(cluster).apps.deleteNamespacedDaemonSet({ namespace: NS, name: 'istio-cni-node' });
  const exit = await daemon.stop('SIGTERM');
  assert.equal(exit.code, 0, daemon.describe());
  assert.match(decision(daemon), /^uninstalling the plugin: DaemonSet istio-cni-node no longer exists/);
  assert.ok(everythingGone());
});

test('API server unreachable at SIGTERM: the plugin stays (pods wait rather than start outside the mesh)', { skip }, async (t) => {
  await cluster.apply([await findObject('DaemonSet', 'istio-cni-node')]);
  const daemon = await runUntilReady();
  t.after(() => daemon.stop('SIGKILL'));
  cluster.faults.failWith500(100, { match: { path: '/daemonsets/' } });
  const exit = await daemon.stop('SIGTERM');
  cluster.faults.clear();
  assert.equal(exit.code, 0, daemon.describe());
  assert.match(decision(daemon), /^leaving the plugin installed: cannot read DaemonSet istio-system\/istio-cni-node/);
  assert.ok(everythingInPlace());
});
