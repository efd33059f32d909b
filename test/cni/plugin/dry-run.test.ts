/**
 * Istio's CNI dry-run conformance through the whole plugin process: each case of
 * test/fixtures/istio/istio-cni-plugin becomes a pod in the devcluster; the plugin runs ADD with
 * DRY_RUN_FILE_PATH set (Istio's variable), reads the pod over HTTPS with the kubeconfig install-cni
 * writes, and writes the iptables-restore input it would program. It must equal the golden.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execPlugin } from '../../support/cni-runner.js';
import { adminRequest, namespaceObject, startPluginCluster, type PluginCluster } from '../e2e/fixture.js';
import { renderKubeconfig } from '../../../src/cni/install/kubeconfig.js';
import { Secret } from '../../../src/core/secret.js';
import { casePod, goldenText, loadCniCases } from './conformance-cases.js';
import { tempDirSync } from '../../support/scratch.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const MAIN = resolve(here, '../../../src/cni/plugin/main.js');
const cases = loadCniCases();

let dir = '';
let pc: PluginCluster | undefined;

before(async () => {
  dir = tempDirSync('cni-dryrun-');
  pc = await startPluginCluster(dir);
  await pc.cluster.apply([
    namespaceObject('test-ns'),
    ...Object.entries(cases).map(([name, c]) => casePod(`pod-${name}`, 'test-ns', c)),
  ]);
});

after(async () => {
  try {
    await pc?.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const conf = () =>
  JSON.stringify({
    cniVersion: '1.0.0',
    name: 'k8s-pod-network',
    type: 'istio-cni',
    cni_agent_run_dir: pc!.runDir,
    plugin_log_level: 'info',
    prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.244.0.9/24', gateway: '10.244.0.1' }] },
  });

for (const [name, c] of Object.entries(cases)) {
  test(`istio-cni-plugin dry-run case ${name} matches ${c.golden}`, async () => {
    const out = join(dir, `${name}.txt`);
    const o = await execPlugin({
      command: process.execPath,
      args: [MAIN],
      env: {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: `c-${name}`,
        CNI_NETNS: '/var/run/netns/not-used-in-dry-run',
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/opt/cni/bin',
        CNI_ARGS: `K8S_POD_NAMESPACE=test-ns;K8S_POD_NAME=pod-${name}`,
        DRY_RUN_FILE_PATH: out,
      },
      stdin: conf(),
    });
    assert.equal(o.code, 0, o.stdout + o.stderr);
    assert.equal(JSON.parse(o.stdout).ips[0].address, '10.244.0.9/24');
    assert.equal(readFileSync(out, 'utf8'), goldenText(c));
  });
}

test('dry-run writes nothing for a pod without a sidecar', async () => {
  await pc!.cluster.apply([
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'no-sidecar', namespace: 'test-ns' }, spec: { containers: [{ name: 'app', image: 'app' }] } },
  ]);
  const out = join(dir, 'none.txt');
  const o = await execPlugin({
    command: process.execPath,
    args: [MAIN],
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c-none',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: 'K8S_POD_NAMESPACE=test-ns;K8S_POD_NAME=no-sidecar',
      DRY_RUN_FILE_PATH: out,
    },
    stdin: conf(),
  });
  assert.equal(o.code, 0, o.stdout);
  assert.equal(existsSync(out), false);
  assert.match(o.stderr, /no istio-proxy container/);
});

test('a pod the API server does not know fails after the retries with 100 (RBAC-enforced reads work)', async () => {
  const o = await execPlugin({
    command: process.execPath,
    args: [MAIN],
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c-ghost',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: 'K8S_POD_NAMESPACE=test-ns;K8S_POD_NAME=ghost',
    },
    stdin: JSON.stringify({ ...JSON.parse(conf()), pod_retrieval_max_retries: 2, pod_retrieval_interval_ms: 20 }),
  });
  assert.equal(o.code, 1);
  const e = JSON.parse(o.stdout) as { code: number; msg: string };
  assert.equal(e.code, 100);
  assert.match(e.msg, /HTTP 404/);
});

test('API errors are retried as Istio does: two 500s, then the pod is read and programmed', async () => {
  pc!.cluster.faults.failWith500(2, { match: { path: '/pods/pod-basic' } });
  const out = join(dir, 'retried.txt');
  const o = await execPlugin({
    command: process.execPath,
    args: [MAIN],
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c-retry',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: 'K8S_POD_NAMESPACE=test-ns;K8S_POD_NAME=pod-basic',
      DRY_RUN_FILE_PATH: out,
    },
    stdin: JSON.stringify({ ...JSON.parse(conf()), pod_retrieval_interval_ms: 20, plugin_log_level: 'debug' }),
  });
  assert.equal(o.code, 0, o.stdout + o.stderr);
  assert.equal((o.stderr.match(/"API request failed"/g) ?? []).length, 2);
  assert.equal(readFileSync(out, 'utf8'), goldenText(cases.basic!));
});

test('a service account without the plugin\'s RBAC is refused: 100 with the 403, token not logged', async () => {
  await pc!.cluster.apply([{ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'nobody', namespace: 'istio-system' } }]);
  const tr = (await adminRequest(pc!.cluster, 'POST', '/api/v1/namespaces/istio-system/serviceaccounts/nobody/token', {
    spec: { expirationSeconds: 600 },
  })) as { status: { token: string } };
  const url = new URL(pc!.cluster.url);
  const kubeconfig = join(dir, 'kubeconfig-nobody');
  writeFileSync(
    kubeconfig,
    renderKubeconfig({
      serviceHost: url.hostname,
      servicePort: url.port,
      serviceProtocol: 'https',
      caPem: pc!.cluster.caCertPem,
      skipTlsVerify: false,
      token: new Secret(tr.status.token),
    }),
  );
  const o = await execPlugin({
    command: process.execPath,
    args: [MAIN],
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'c-rbac',
      CNI_NETNS: '/var/run/netns/x',
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: 'K8S_POD_NAMESPACE=test-ns;K8S_POD_NAME=pod-basic',
    },
    stdin: JSON.stringify({
      ...JSON.parse(conf()),
      kubernetes: { kubeconfig },
      pod_retrieval_max_retries: 2,
      pod_retrieval_interval_ms: 10,
      plugin_log_level: 'debug',
    }),
  });
  assert.equal(o.code, 1, o.stdout);
  const e = JSON.parse(o.stdout) as { code: number; msg: string };
  assert.equal(e.code, 100);
  assert.match(e.msg, /HTTP 403/);
  assert.ok(!o.stderr.includes(tr.status.token) && !o.stdout.includes(tr.status.token), 'the token is never printed');
});
