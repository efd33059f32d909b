import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AuthenticationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { loadKubeConfig, IN_CLUSTER_SA_DIR, KubeError } from '../../src/kube/index.js';
import { startCluster, serviceAccountToken, createServiceAccount, type DevCluster } from '../support/cluster.js';
import { tempDirSync } from '../support/scratch.js';

let cluster: DevCluster;
let dir: string;
before(async () => {
  cluster = await startCluster();
  dir = tempDirSync('kube-config-');
});
after(async () => {
  try {
    await cluster?.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('loadKubeConfig reads the kubeconfig the devcluster writes and talks to it', async () => {
  const path = join(dir, 'admin.kubeconfig');
  await cluster.writeKubeconfig(path);
  const kc = loadKubeConfig({ kubeconfigPath: path });
  assert.equal(kc.getCurrentCluster()?.server, cluster.url);
  const ns = await kc.makeApiClient(CoreV1Api).readNamespace({ name: 'kube-system' });
  assert.equal(ns.status?.phase, 'Active');
});

test('loadKubeConfig in-cluster uses the mounted service-account token and CA', async () => {
  await createServiceAccount(cluster, { namespace: 'incluster', name: 'agent' });
  const token = await serviceAccountToken(cluster, { namespace: 'incluster', serviceAccountName: 'agent' });
  const root = join(dir, 'root');
  await mkdir(join(root, IN_CLUSTER_SA_DIR), { recursive: true });
  await writeFile(join(root, IN_CLUSTER_SA_DIR, 'token'), token);
  await writeFile(join(root, IN_CLUSTER_SA_DIR, 'ca.crt'), cluster.caCertPem);
  await writeFile(join(root, IN_CLUSTER_SA_DIR, 'namespace'), 'incluster');
  const url = new URL(cluster.url);
  const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
  process.env.KUBERNETES_SERVICE_HOST = url.hostname;
  process.env.KUBERNETES_SERVICE_PORT = url.port;
  try {
    const kc = loadKubeConfig({ inCluster: true, inClusterRoot: root });
    const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    assert.equal(review.status?.userInfo?.username, 'system:serviceaccount:incluster:agent');
  } finally {
    if (saved.host === undefined) delete process.env.KUBERNETES_SERVICE_HOST;
    else process.env.KUBERNETES_SERVICE_HOST = saved.host;
    if (saved.port === undefined) delete process.env.KUBERNETES_SERVICE_PORT;
    else process.env.KUBERNETES_SERVICE_PORT = saved.port;
  }
});

test('loadKubeConfig fails clearly: missing file, garbage file, no in-cluster token', async () => {
  assert.throws(() => loadKubeConfig({ kubeconfigPath: join(dir, 'nope') }), (e: unknown) => e instanceof KubeError && e.code === 'ERR_KUBE_CONFIG_INVALID' && /does not exist/.test(e.message));
  const garbage = join(dir, 'garbage');
  await writeFile(garbage, 'this: [is not a kubeconfig');
  assert.throws(() => loadKubeConfig({ kubeconfigPath: garbage }), (e: unknown) => e instanceof KubeError && e.code === 'ERR_KUBE_CONFIG_INVALID');
  const empty = join(dir, 'empty');
  await writeFile(empty, 'apiVersion: v1\nkind: Config\nclusters: []\n');
  assert.throws(() => loadKubeConfig({ kubeconfigPath: empty }), (e: unknown) => e instanceof KubeError && e.code === 'ERR_KUBE_CONFIG_INVALID');
  assert.throws(() => loadKubeConfig({ inCluster: true, inClusterRoot: join(dir, 'no-root') }), (e: unknown) => e instanceof KubeError && /no service-account token/.test(e.message));
});
