/**
 * End to end, as root, for an ambient pod: bridge + host-local + istio-cni (the packaged single
 * executable) with ambient enabled; the pod and its namespace come from the devcluster; the real
 * node broker listens on `<cni_agent_run_dir>/pluginevent.sock`. The broker receives the
 * registration (pod, netns, the address host-local gave) and obtains the pod's certificate from
 * the CA; a pod that is not ambient is not registered; with the broker gone, ADD fails with
 * "try again later" and DEL still succeeds.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { CniPluginError, CniRuntime, type Attachment, type Conflist } from '../../support/cni-runner.js';
import { seaBinaries } from '../../support/sea-binary.js';
import { NODE_NAME, TRUST_DOMAIN, startBrokerStack, type BrokerStack } from './broker-stack.js';
import { Netns, cniBinDir, conflist, e2eUnavailable, namespaceObject, networkNames, podObject, preserveIpForward, removeBridge, startPluginCluster, type PluginCluster } from './fixture.js';

const skip = e2eUnavailable();
const net = networkNames('a');
let dir = '';
let pc: PluginCluster | undefined;
let stack: BrokerStack | undefined;
let runtime: CniRuntime;
let list: Conflist;
const namespaces: Netns[] = [];

function attachment(ns: Netns, namespace: string, pod: string): Attachment {
  return { containerId: `${pod}-${process.pid}`, netns: ns.path, ifname: 'eth0', args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${pod}` };
}

let restoreIpForward: (() => void) | undefined;

before(async () => {
  if (skip) return;
  restoreIpForward = preserveIpForward();
  dir = mkdtempSync(join(tmpdir(), 'cni-e2e-ambient-'));
  const bins = await seaBinaries();
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
  runtime = new CniRuntime({ cniPath: [cniBinDir(dir, bins.istioCni)] });
  list = conflist(net, { ipamDir: join(dir, 'ipam'), runDir: pc.runDir, ambient: true, extra: { pod_retrieval_max_retries: 2 } });
});

after(async () => {
  for (const ns of namespaces) ns.remove();
  removeBridge(net.bridge);
  restoreIpForward?.();
  await stack?.stop();
  await pc?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function registrations(pod: string): Array<Record<string, unknown>> {
  return (stack?.logs ?? [])
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((r) => r.msg === 'pod registered by CNI' && r.pod === pod);
}

test('an ambient pod is registered with the broker, which fetches its certificate', { skip }, async () => {
  const ns = new Netns(`cbcni-a-${process.pid}`);
  namespaces.push(ns);
  const a = attachment(ns, 'mesh', 'web-1');
  const result = await runtime.add(list, a);
  const ip = (result.ips as Array<{ address: string }>)[0]!.address;

  const regs = registrations('mesh/web-1');
  assert.equal(regs.length, 1, 'exactly one registration reached the broker socket');
  assert.equal(regs[0]!.netns, ns.path);
  assert.equal(regs[0]!.outcome, 'eligible');

  const identity = `spiffe://${TRUST_DOMAIN}/ns/mesh/sa/web`;
  let status;
  for (let i = 0; i < 200; i++) {
    status = stack!.broker.snapshot().find((s) => s.identity === identity);
    if (status?.state === 'ready') break;
    await delay(50);
  }
  assert.equal(status?.state, 'ready', `certificate for ${identity}: ${JSON.stringify(status)}`);
  assert.ok(status!.pods.some((p) => p.name === 'web-1'));
  assert.ok(ip.startsWith(net.gateway.replace(/1$/, '')), ip);

  // No redirection rules for ambient pods from the plugin; DEL and a second ADD are clean.
  assert.doesNotMatch(ns.exec('iptables-save', []), /ISTIO_/);
  await runtime.del(list, a);
  assert.doesNotMatch(ns.exec('ip', ['-o', 'link']), /eth0/);
  await runtime.add(list, a);
  assert.equal(registrations('mesh/web-1').length, 2, 'the repeated ADD registers again (idempotent on the broker)');
  await runtime.del(list, a);
});

test('a pod that is not ambient is not registered and passes through', { skip }, async () => {
  const ns = new Netns(`cbcni-p-${process.pid}`);
  namespaces.push(ns);
  const a = attachment(ns, 'plain', 'plain-1');
  const result = await runtime.add(list, a);
  assert.equal((result.ips as unknown[]).length, 1);
  assert.equal(registrations('plain/plain-1').length, 0);
  await runtime.del(list, a);
});

test('a pod the broker refuses (it runs on another node) fails ADD with 101 and the broker\'s reason', { skip }, async () => {
  const ns = new Netns(`cbcni-o-${process.pid}`);
  namespaces.push(ns);
  const a = attachment(ns, 'mesh', 'elsewhere-1');
  await assert.rejects(runtime.add(list, a), (err: unknown) => {
    assert.ok(err instanceof CniPluginError, String(err));
    assert.equal(err.result?.code, 101);
    assert.match(err.result?.msg ?? '', /HTTP 400/);
    assert.match(err.result?.details ?? '', /does not run on this node/);
    return true;
  });
  await runtime.del(list, a);
});

test('with the broker gone, ADD of an ambient pod fails with 11 and DEL still succeeds', { skip }, async () => {
  await stack!.stop();
  const ns = new Netns(`cbcni-g-${process.pid}`);
  namespaces.push(ns);
  const a = attachment(ns, 'mesh', 'web-1');
  await assert.rejects(runtime.add(list, a), (err: unknown) => {
    assert.ok(err instanceof CniPluginError, String(err));
    assert.equal(err.plugin, 'istio-cni');
    assert.equal(err.result?.code, 11);
    assert.match(err.result?.msg ?? '', /cannot reach the node broker/);
    return true;
  });
  // The runtime cleans up after a failed ADD with DEL through the whole list.
  await runtime.del(list, a);
});
