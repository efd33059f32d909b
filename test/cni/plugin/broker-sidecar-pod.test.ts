/**
 * The sidecar ADD's pod read from the node broker (src/protocol/cni-sidecar-pod.ts), in process
 * (runPlugin, dry-run) over real Unix sockets with the real node broker watching the devcluster:
 * for each pod the rules (the dry-run restore input) and the ADD's output are the same whether the
 * broker answered or the API server did; the broker answers without any API access (the plugin's
 * kubeconfig does not exist); a pod the broker does not watch, a UID it does not have and a broker
 * that is gone all take the API path, with the API path's outcome.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runPlugin } from '../../../src/cni/plugin/index.js';
import { AMBIENT_ADD_PATH } from '../../../src/protocol/cni-ambient-add.js';
import { SIDECAR_POD_PATH } from '../../../src/protocol/cni-sidecar-pod.js';
import { NODE_NAME, startBrokerStack, type BrokerStack } from '../e2e/broker-stack.js';
import { adminRequest, CNI_NAMESPACE, namespaceObject, podObject, sidecarPod, startPluginCluster, type PluginCluster } from '../e2e/fixture.js';
import { eventually } from '../../broker/support/eventually.js';
import { requestUnix } from '../../broker/support/unix-http.js';
import { tempDirSync } from '../../support/scratch.js';

const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [{ address: '10.244.0.9/24', gateway: '10.244.0.1', interface: 0 }] };
const proxy = (extra: Record<string, unknown> = {}) => ({ name: 'istio-proxy', image: 'registry.local/proxyv2:1', args: ['proxy', 'sidecar'], ...extra });
const STATUS = { 'sidecar.istio.io/status': '{"containers":["istio-proxy"]}' };
const RANGES = {
  'traffic.sidecar.istio.io/includeOutboundIPRanges': '10.0.0.0/8,172.16.0.0/12',
  'traffic.sidecar.istio.io/excludeOutboundIPRanges': '10.96.0.1/32',
  'traffic.sidecar.istio.io/includeInboundPorts': '8080,9090',
  'traffic.sidecar.istio.io/excludeOutboundPorts': '5432',
  'traffic.sidecar.istio.io/includeOutboundPorts': '443',
};

interface Run {
  readonly exitCode: number;
  readonly stdout: string;
  readonly rules: string;
  readonly logs: ReadonlyArray<Record<string, unknown>>;
}

describe('sidecar ADD reads the pod from the node broker, the API server only as fallback: same rules', () => {
  let dir: string;
  let pc: PluginCluster;
  let stack: BrokerStack | undefined;
  let runs = 0;
  const uids = new Map<string, string>();
  const socket = () => join(pc.runDir, 'pluginevent.sock');

  const add = async (pod: string, o: { uid?: string; api?: boolean; broker?: boolean; ambient?: boolean } = {}): Promise<Run> => {
    const [ns, name] = pod.split('/');
    const uid = o.uid ?? uids.get(pod)!;
    const logs: string[] = [];
    const dryRun = join(dir, `dry-run-${++runs}.txt`);
    const r = await runPlugin({
      env: {
        CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'side01', CNI_NETNS: '/var/run/netns/side', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin',
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${name};K8S_POD_UID=${uid}`,
        DRY_RUN_FILE_PATH: dryRun,
      },
      stdin: JSON.stringify({
        cniVersion: '1.0.0', name: 'cbnet', type: 'istio-cni', cni_agent_run_dir: pc.runDir, pod_namespace: CNI_NAMESPACE,
        plugin_log_level: 'debug', pod_retrieval_max_retries: 1, prevResult, ...(o.ambient ? { ambient_enabled: true } : {}),
        ...(o.api === false ? { kubernetes: { kubeconfig: '/nonexistent/istio-cni-kubeconfig' } } : {}),
        ...(o.broker === false ? { cni_event_socket: join(dir, 'no-broker.sock') } : {}),
      }),
      logSink: (l) => logs.push(l),
    });
    let rules = '';
    try {
      rules = readFileSync(dryRun, 'utf8');
    } catch {
      // no rules written
    }
    return { exitCode: r.exitCode, stdout: r.stdout, rules, logs: logs.map((l) => JSON.parse(l) as Record<string, unknown>) };
  };
  const fromBroker = (r: Run) => r.logs.some((l) => l.msg === 'pod read from the node broker');
  const fellBack = (r: Run) => r.logs.some((l) => l.msg === 'broker does not have the pod; reading it from the API server');
  const sameAsApi = async (pod: string, r: Run) => {
    const api = await add(pod, { broker: false });
    assert.equal(fromBroker(api), false);
    assert.deepEqual({ exitCode: r.exitCode, stdout: r.stdout, rules: r.rules }, { exitCode: api.exitCode, stdout: api.stdout, rules: api.rules });
  };

  before(async () => {
    dir = tempDirSync('cni-side-');
    pc = await startPluginCluster(dir);
    await pc.cluster.apply([
      namespaceObject('shop'),
      namespaceObject('mesh', { 'istio.io/dataplane-mode': 'ambient' }),
      podObject('shop', 'ranges-1', { nodeName: NODE_NAME, annotations: { ...STATUS, ...RANGES }, containers: [{ name: 'app', image: 'a', ports: [{ containerPort: 8080 }, { containerPort: 9090 }] }, proxy()] }),
      podObject('shop', 'noports-1', { nodeName: NODE_NAME, annotations: STATUS, containers: [{ name: 'app', image: 'a' }, proxy()] }),
      podObject('shop', 'tproxy-1', {
        nodeName: NODE_NAME,
        annotations: { ...STATUS, 'sidecar.istio.io/interceptionMode': 'TPROXY', 'traffic.sidecar.istio.io/excludeInterfaces': 'eth9' },
        labels: { app: 'tproxy' },
        containers: [{ name: 'app', image: 'a' }, proxy({ env: [{ name: 'ISTIO_META_DNS_CAPTURE', value: 'true' }, { name: 'INVALID_DROP', value: 'true' }], securityContext: { runAsUser: 1500, runAsGroup: 1501 } })],
      }),
      podObject('shop', 'badports-1', { nodeName: NODE_NAME, annotations: { ...STATUS, 'traffic.sidecar.istio.io/includeInboundPorts': '99999' }, containers: [proxy()] }),
      podObject('shop', 'plain-1', { nodeName: NODE_NAME }),
      podObject('mesh', 'notambient-1', { nodeName: NODE_NAME, labels: { 'istio.io/dataplane-mode': 'none' }, annotations: { ...STATUS, ...RANGES }, containers: [proxy()] }),
      sidecarPod('shop', 'elsewhere-1'),
    ]);
    for (const pod of ['shop/ranges-1', 'shop/noports-1', 'shop/tproxy-1', 'shop/badports-1', 'shop/plain-1', 'mesh/notambient-1', 'shop/elsewhere-1']) {
      const [ns, name] = pod.split('/');
      const obj = (await adminRequest(pc.cluster, 'GET', `/api/v1/namespaces/${ns}/pods/${name}`)) as { metadata: { uid: string } };
      uids.set(pod, obj.metadata.uid);
    }
    stack = await startBrokerStack(pc);
    const probe = JSON.stringify({ namespace: 'shop', name: 'plain-1', uid: uids.get('shop/plain-1') });
    await eventually('the broker watches shop/plain-1', async () => (await requestUnix(socket(), SIDECAR_POD_PATH, probe)).status === 200);
  });

  after(async () => {
    await stack?.stop();
    await pc.close();
  });

  for (const pod of ['shop/ranges-1', 'shop/noports-1', 'shop/tproxy-1', 'shop/badports-1', 'shop/plain-1']) {
    it(`${pod}: the broker answers (no API access at all) and the rules are the API path's`, async () => {
      const r = await add(pod, { api: false });
      assert.ok(fromBroker(r), JSON.stringify(r.logs));
      await sameAsApi(pod, r);
    });
  }

  it('the cases above really produce rules (and the bad annotation its error)', async () => {
    const ranges = await add('shop/ranges-1', { api: false });
    assert.equal(ranges.exitCode, 0);
    assert.match(ranges.rules, /10\.0\.0\.0\/8/);
    assert.match(ranges.rules, /10\.96\.0\.1\/32/);
    assert.match(ranges.rules, /9090/);
    const tproxy = await add('shop/tproxy-1', { api: false });
    assert.match(tproxy.rules, /TPROXY/);
    assert.match(tproxy.rules, /1500/);
    const bad = await add('shop/badports-1', { api: false });
    assert.equal(bad.exitCode, 1);
    assert.match(bad.stdout, /includeInboundPorts/);
    assert.equal((await add('shop/plain-1', { api: false })).rules, '');
  });

  it('ambient on, a known pod that is not ambient: its sidecar fields come from the broker too', async () => {
    // The ambient decision needs the namespace watch listed too (until then the broker says "unknown").
    const probe = JSON.stringify({ event: { Netns: '', PodName: 'plain-1', PodNamespace: 'shop', IPs: null }, podUid: '', selectors: null });
    await eventually('the broker knows shop/plain-1 for ambient', async () => (await requestUnix(socket(), AMBIENT_ADD_PATH, probe)).text.includes('"known":true'));
    const r = await add('mesh/notambient-1', { api: false, ambient: true });
    assert.equal(r.exitCode, 0, r.stdout);
    assert.ok(fromBroker(r));
    assert.match(r.rules, /172\.16\.0\.0\/12/);
    const api = await add('mesh/notambient-1', { ambient: true, broker: false });
    assert.equal(r.rules, api.rules);
  });

  it('a pod the broker does not watch (another node) falls back to the API server: same rules', async () => {
    const r = await add('shop/elsewhere-1');
    assert.ok(fellBack(r) && !fromBroker(r));
    assert.equal(r.exitCode, 0, r.stdout);
    assert.notEqual(r.rules, '');
    await sameAsApi('shop/elsewhere-1', r);
  });

  it('a UID the broker does not have is never answered from its cache: 404, and the API path is taken', async () => {
    const other = '00000000-0000-0000-0000-000000000000';
    const direct = await requestUnix(socket(), SIDECAR_POD_PATH, JSON.stringify({ namespace: 'shop', name: 'ranges-1', uid: other }));
    assert.equal(direct.status, 404);
    assert.equal((await requestUnix(socket(), SIDECAR_POD_PATH, JSON.stringify({ namespace: 'shop', name: 'ranges-1' }))).status, 400);
    const r = await add('shop/ranges-1', { uid: other });
    assert.ok(fellBack(r) && !fromBroker(r));
    // The API path reads the pod by name (as today) and builds the same rules.
    await sameAsApi('shop/ranges-1', r);
    // Without API access there is nothing to fall back to: the ADD fails, as it does today.
    assert.equal((await add('shop/ranges-1', { uid: other, api: false })).exitCode, 1);
  });

  it('no K8S_POD_UID: the broker is not asked; the API path is taken', async () => {
    const r = await add('shop/ranges-1', { uid: '' });
    assert.equal(fromBroker(r) || fellBack(r), false);
    await sameAsApi('shop/ranges-1', r);
  });

  it('with the broker gone, ADD falls back to the API server: same rules', async () => {
    const with_ = await add('shop/ranges-1', { api: false });
    await stack!.stop();
    stack = undefined;
    const r = await add('shop/ranges-1');
    assert.ok(fellBack(r));
    assert.deepEqual({ exitCode: r.exitCode, stdout: r.stdout, rules: r.rules }, { exitCode: with_.exitCode, stdout: with_.stdout, rules: with_.rules });
  });
});
