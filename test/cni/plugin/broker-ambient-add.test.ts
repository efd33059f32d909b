/**
 * The one-round-trip ambient ADD (src/protocol/cni-ambient-add.ts), in process (runPlugin) over
 * real Unix sockets: the real node broker (its pod and namespace watches on the devcluster)
 * decides and registers a pod it knows without the plugin touching the API server (the plugin's
 * kubeconfig does not even exist); a pod it does not know, a cached pod of another UID, a broker
 * that is gone and answers that are not the protocol's all take today's path (API reads, then
 * POST /cmdadd), with today's outcome.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runPlugin } from '../../../src/cni/plugin/index.js';
import { AMBIENT_ADD_PATH } from '../../../src/protocol/cni-ambient-add.js';
import { NODE_NAME, startBrokerStack, type BrokerStack } from '../e2e/broker-stack.js';
import { CNI_NAMESPACE, namespaceObject, podObject, startPluginCluster, type PluginCluster } from '../e2e/fixture.js';
import { eventually } from '../../broker/support/eventually.js';
import { requestUnix } from '../../broker/support/unix-http.js';
import { tempDirSync } from '../../support/scratch.js';

const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [{ address: '10.244.0.9/24', gateway: '10.244.0.1', interface: 0 }] };

interface Run {
  readonly exitCode: number;
  readonly out: Record<string, unknown>;
  readonly logs: Array<Record<string, unknown>>;
}

describe('ambient ADD in one round trip to the node broker', () => {
  let dir: string;
  let pc: PluginCluster;
  let stack: BrokerStack | undefined;

  const add = async (pod: string, extra: Record<string, unknown> = {}, args = ''): Promise<Run> => {
    const [ns, name] = pod.split('/');
    const logs: string[] = [];
    const r = await runPlugin({
      env: {
        CNI_COMMAND: 'ADD',
        CNI_CONTAINERID: 'ask01',
        CNI_NETNS: '/var/run/netns/ask',
        CNI_IFNAME: 'eth0',
        CNI_PATH: '/opt/cni/bin',
        CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=${name}${args}`,
      },
      stdin: JSON.stringify({
        cniVersion: '1.0.0', name: 'cbnet', type: 'istio-cni', cni_agent_run_dir: pc.runDir, pod_namespace: CNI_NAMESPACE,
        ambient_enabled: true, plugin_log_level: 'debug', pod_retrieval_max_retries: 1, prevResult, ...extra,
      }),
      logSink: (l) => logs.push(l),
    });
    return { exitCode: r.exitCode, out: JSON.parse(r.stdout || '{}') as Record<string, unknown>, logs: logs.map((l) => JSON.parse(l) as Record<string, unknown>) };
  };
  const registrations = (pod: string) =>
    (stack?.logs ?? []).map((l) => JSON.parse(l) as Record<string, unknown>).filter((r) => r.msg === 'pod registered by CNI' && r.pod === pod);
  const noApi = { kubernetes: { kubeconfig: '/nonexistent/istio-cni-kubeconfig' } };

  before(async () => {
    dir = tempDirSync('cni-ask-');
    pc = await startPluginCluster(dir);
    await pc.cluster.apply([
      namespaceObject('mesh', { 'istio.io/dataplane-mode': 'ambient' }),
      namespaceObject('plain'),
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'web', namespace: 'mesh' } },
      podObject('mesh', 'web-1', { nodeName: NODE_NAME, serviceAccountName: 'web' }),
      podObject('plain', 'plain-1', { nodeName: NODE_NAME }),
      podObject('mesh', 'elsewhere-1', { nodeName: 'another-node', serviceAccountName: 'web' }),
    ]);
    stack = await startBrokerStack(pc);
    // Until the namespace watch has listed, the broker answers "unknown": wait for it (no side effect: plain-1 is not ambient).
    const probe = JSON.stringify({ event: { Netns: '', PodName: 'plain-1', PodNamespace: 'plain', IPs: null }, podUid: '', selectors: null });
    await eventually('the broker knows plain/plain-1', async () => (await requestUnix(join(pc.runDir, 'pluginevent.sock'), AMBIENT_ADD_PATH, probe)).text.includes('"known":true'));
  });

  after(async () => {
    await stack?.stop();
    await pc.close();
  });

  it('a pod the broker watches is decided and registered by the broker alone: no API server needed', async () => {
    const r = await add('mesh/web-1', noApi);
    assert.equal(r.exitCode, 0, JSON.stringify(r));
    assert.deepEqual(r.out, prevResult);
    const regs = registrations('mesh/web-1');
    assert.equal(regs.length, 1);
    assert.equal(regs[0]!.from, 'watch');
    assert.equal(regs[0]!.outcome, 'eligible');
    assert.equal(regs[0]!.netns, '/var/run/netns/ask');
    assert.ok(r.logs.some((l) => l.msg === 'ambient pod registered with the node broker' && l.via === 'broker watch'));
  });

  it('a known pod that is not ambient is not registered; the sidecar decision still reads the pod', async () => {
    const r = await add('plain/plain-1');
    assert.equal(r.exitCode, 0, JSON.stringify(r));
    assert.deepEqual(r.out, prevResult);
    assert.equal(registrations('plain/plain-1').length, 0);
    assert.ok(r.logs.some((l) => l.msg === 'no redirection for pod'));
  });

  it('a pod the broker does not watch falls back to the API server and POST /cmdadd (here: refused, 101, as today)', async () => {
    const r = await add('mesh/elsewhere-1');
    assert.equal(r.exitCode, 1);
    assert.equal(r.out.code, 101);
    assert.match(String(r.out.msg), /HTTP 400/);
    assert.ok(r.logs.some((l) => l.msg === 'broker does not know the pod; reading it from the API server'));
  });

  it('a cached pod of another UID is not this pod: the API path registers it', async () => {
    const before = registrations('mesh/web-1').length;
    const r = await add('mesh/web-1', {}, ';K8S_POD_UID=00000000-0000-0000-0000-000000000000');
    assert.equal(r.exitCode, 0, JSON.stringify(r));
    const regs = registrations('mesh/web-1');
    assert.equal(regs.length, before + 1);
    assert.equal(regs.at(-1)!.from, undefined, 'registered through /cmdadd, the broker looked the pod up');
    // Without API access the fallback has nothing to read: the ADD fails as it does today.
    const blind = await add('mesh/web-1', noApi, ';K8S_POD_UID=00000000-0000-0000-0000-000000000000');
    assert.equal(blind.exitCode, 1);
  });

  it('with the broker gone, ADD takes the API path and fails with 11 as today', async () => {
    await stack!.stop();
    stack = undefined;
    const r = await add('mesh/web-1');
    assert.equal(r.exitCode, 1);
    assert.equal(r.out.code, 11);
    assert.match(String(r.out.msg), /cannot reach the node broker/);
  });
});

describe('answers that are not the protocol\'s: the plugin falls back to the API server', () => {
  let dir: string;
  let pc: PluginCluster;
  let server: Server;
  let socket: string;
  let answer: (res: import('node:http').ServerResponse) => void = () => undefined;
  const seen: string[] = [];

  before(async () => {
    dir = tempDirSync('cni-ask-bad-');
    pc = await startPluginCluster(dir);
    await pc.cluster.apply([
      namespaceObject('mesh', { 'istio.io/dataplane-mode': 'ambient' }),
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'web', namespace: 'mesh' } },
      podObject('mesh', 'web-1', { nodeName: NODE_NAME, serviceAccountName: 'web' }),
    ]);
    socket = join(dir, 'faulty.sock');
    // A broker socket that answers /v1/ambient-add badly and accepts /cmdadd (what the fallback sends).
    server = createServer((req, res) => {
      seen.push(req.url ?? '');
      req.resume();
      req.on('end', () => (req.url === AMBIENT_ADD_PATH ? answer(res) : res.writeHead(200).end('{"registered":true}\n')));
    });
    await new Promise<void>((r) => server.listen(socket, r));
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
    await pc.close();
  });

  const cases: Array<[string, (res: import('node:http').ServerResponse) => void]> = [
    ['HTTP 500', (res) => res.writeHead(500).end('oops\n')],
    ['HTTP 404 (a broker without the path)', (res) => res.writeHead(404).end('not found\n')],
    ['not JSON', (res) => res.writeHead(200).end('yes')],
    ['known is not a boolean', (res) => res.writeHead(200).end('{"known":"yes"}')],
    ['ambient without registered', (res) => res.writeHead(200).end('{"known":true,"ambient":true}')],
    ['a JSON array', (res) => res.writeHead(200).end('[true]')],
    ['cut off mid-body', (res) => { res.writeHead(200, { 'content-length': '100' }); res.write('{"known":tr'); setImmediate(() => res.destroy()); }],
    ['no answer (the plugin stops waiting)', () => undefined],
  ];
  for (const [what, reply] of cases) {
    it(what, async () => {
      answer = reply;
      seen.length = 0;
      const logs: string[] = [];
      const r = await runPlugin({
        env: {
          CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'ask02', CNI_NETNS: '/var/run/netns/bad', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin',
          CNI_ARGS: 'K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=web-1',
        },
        stdin: JSON.stringify({ cniVersion: '1.0.0', name: 'cbnet', type: 'istio-cni', cni_agent_run_dir: pc.runDir, cni_event_socket: socket, ambient_enabled: true, plugin_log_level: 'debug', prevResult }),
        logSink: (l) => logs.push(l),
      });
      assert.equal(r.exitCode, 0, r.stdout + logs.join('\n'));
      assert.deepEqual(JSON.parse(r.stdout), prevResult);
      assert.deepEqual(seen, [AMBIENT_ADD_PATH, '/cmdadd'], 'asked the broker, then read the API server and registered through /cmdadd');
    });
  }
});
