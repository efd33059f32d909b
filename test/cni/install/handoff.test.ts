/**
 * The hand-off install-cni exists for: after it has installed, the container runtime can run
 * the plugin it copied, with the config entry it chained and the kubeconfig it wrote, and the
 * plugin reaches the API server as istio-cni under the deploy/ RBAC. The packaged plugin (SEA
 * executable) is used, as on a node. When the token file rotates to an account without the
 * plugin's permissions, the rewritten kubeconfig carries it and the plugin's ADD fails.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createPod, serviceAccountToken, startCluster, type DevCluster } from '../../support/cluster.js';
import { execPlugin } from '../../support/cni-runner.js';
import { seaBinaries } from '../../support/sea-binary.js';
import { identityObjects } from '../../deploy/manifests.js';
import { DaemonProcess, makeHostTree, treeEnv, waitFor, type HostTree } from './host-tree.js';
import { kubectlMissing } from '../../support/tools.js';

let cluster: DevCluster;
let tree: HostTree;
let daemon: DaemonProcess | undefined;

const PRIMARY = '10-bridge.conflist';
const PREV_RESULT = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', sandbox: '/var/run/netns/handoff-test' }],
  ips: [{ address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 0 }],
  dns: {},
};

/** The RBAC comes from `kubectl kustomize deploy/`. */
const skip = kubectlMissing();

before(async () => {
  if (skip) return;
  cluster = await startCluster({ simulateKubelet: false });
  await cluster.apply(await identityObjects());
  await createPod(cluster, { namespace: 'app', name: 'web', serviceAccountName: 'web', nodeName: 'node-a' });
  tree = makeHostTree();
  writeFileSync(join(tree.saDir, 'token'), await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'istio-cni' }));
  writeFileSync(join(tree.saDir, 'ca.crt'), cluster.caCertPem);
  writeFileSync(
    join(tree.netDir, PRIMARY),
    JSON.stringify({ cniVersion: '1.0.0', name: 'k8s-pod-network', plugins: [{ type: 'bridge', bridge: 'cni0', ipam: { type: 'host-local', subnet: '10.244.0.0/24' } }] }),
  );
});

after(async () => {
  await daemon?.stop('SIGKILL');
  await cluster?.close();
  tree?.cleanup();
});

/** Runs our plugin as the runtime would for the last entry of the chained list. */
async function pluginAdd(overrides: Record<string, unknown> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const list = JSON.parse(readFileSync(join(tree.netDir, PRIMARY), 'utf8')) as { name: string; cniVersion: string; plugins: Array<Record<string, unknown>> };
  const ours = list.plugins[list.plugins.length - 1]!;
  assert.equal(ours.type, 'istio-cni');
  return execPlugin({
    command: join(tree.binDir, 'istio-cni'),
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'handoff-0001',
      CNI_NETNS: '/var/run/netns/handoff-test',
      CNI_IFNAME: 'eth0',
      CNI_PATH: tree.binDir,
      CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=app;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=handoff-0001',
    },
    stdin: JSON.stringify({ ...ours, ...overrides, name: list.name, cniVersion: list.cniVersion, prevResult: PREV_RESULT }),
    timeoutMs: 60_000,
  });
}

test('the runtime can run what install-cni installed: plugin + entry + kubeconfig reach the API as istio-cni', { skip }, async () => {
  const sea = await seaBinaries();
  const port = new URL(cluster.url).port;
  daemon = new DaemonProcess(
    treeEnv(tree, {
      CNI_BINARIES_SOURCE_DIR: sea.dir,
      CNI_AGENT_RUN_DIR: tree.runDir,
      MOUNTED_CNI_AGENT_RUN_DIR: tree.runDir,
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: port,
      AMBIENT_ENABLED: 'true',
      UNINSTALL_ON_EXIT: 'always',
    }),
  );
  await waitFor(async () => (await daemon!.get('/readyz')).status === 200, 'ready', daemon, 60_000);

  // Ambient on: the plugin reads the pod and its namespace; a plain pod passes through.
  const ok = await pluginAdd();
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  assert.deepStrictEqual(JSON.parse(ok.stdout), PREV_RESULT);

  // The token rotates to the broker's account (may read pods, not namespaces): install-cni
  // rewrites the kubeconfig, and the plugin is now refused by RBAC.
  const before = readFileSync(join(tree.runDir, 'istio-cni-kubeconfig'), 'utf8');
  writeFileSync(join(tree.saDir, '.token.new'), await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'ztunnel' }));
  renameSync(join(tree.saDir, '.token.new'), join(tree.saDir, 'token'));
  await waitFor(() => readFileSync(join(tree.runDir, 'istio-cni-kubeconfig'), 'utf8') !== before, 'kubeconfig rewritten', daemon);
  // (The plugin retries API errors 30 x 1 s by default; two quick attempts are enough here.)
  const denied = await pluginAdd({ pod_retrieval_max_retries: 2, pod_retrieval_interval_ms: 10 });
  assert.notEqual(denied.code, 0, 'ADD must fail without namespaces get');
  const err = JSON.parse(denied.stdout) as { code?: number; msg?: string };
  assert.equal(typeof err.code, 'number');
  assert.ok(typeof err.msg === 'string' && err.msg.length > 0);
});
