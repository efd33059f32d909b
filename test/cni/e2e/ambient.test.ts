/**
 * End to end, as root, for an ambient pod: bridge + host-local + istio-cni (the packaged single
 * executable) with ambient enabled; the pod and its namespace come from the devcluster; the real
 * node broker listens on `<cni_agent_run_dir>/pluginevent.sock`. The broker receives the
 * registration (pod, netns, the address host-local gave) and obtains the pod's certificate from
 * the CA; a pod that is not ambient is not registered; with the broker gone, ADD fails with
 * "try again later" and DEL still succeeds.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { CniPluginError } from '../../support/cni-runner.js';
import { NODE_NAME, TRUST_DOMAIN, startBrokerStack, type BrokerStack } from './broker-stack.js';
import { cniE2e, namespaceObject, networkNames, podObject } from './fixture.js';

let stack: BrokerStack | undefined;
const e2e = cniE2e({
  name: 'ambient',
  net: networkNames('a'),
  ambient: true,
  extra: { pod_retrieval_max_retries: 2 },
  objects: [
    namespaceObject('mesh', { 'istio.io/dataplane-mode': 'ambient' }),
    namespaceObject('plain'),
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'web', namespace: 'mesh' } },
    podObject('mesh', 'web-1', { nodeName: NODE_NAME, serviceAccountName: 'web' }),
    podObject('plain', 'plain-1', { nodeName: NODE_NAME }),
    podObject('mesh', 'elsewhere-1', { nodeName: 'another-node', serviceAccountName: 'web' }),
  ],
  prepare: async (e2e) => {
    stack = await startBrokerStack(e2e.plugin);
    e2e.defer(() => stack?.stop());
  },
});
const { skip, net } = e2e;

function registrations(pod: string): Array<Record<string, unknown>> {
  return (stack?.logs ?? [])
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((r) => r.msg === 'pod registered by CNI' && r.pod === pod);
}

test('an ambient pod is registered with the broker, which fetches its certificate', { skip }, async () => {
  const ns = e2e.netns('a');
  const a = e2e.attachment(ns, { namespace: 'mesh', pod: 'web-1' });
  const result = await e2e.runtime.add(e2e.list, a);
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
  await e2e.runtime.del(e2e.list, a);
  assert.doesNotMatch(ns.exec('ip', ['-o', 'link']), /eth0/);
  await e2e.runtime.add(e2e.list, a);
  assert.equal(registrations('mesh/web-1').length, 2, 'the repeated ADD registers again (idempotent on the broker)');
  await e2e.runtime.del(e2e.list, a);
});

test('a pod that is not ambient is not registered and passes through', { skip }, async () => {
  const ns = e2e.netns('p');
  const a = e2e.attachment(ns, { namespace: 'plain', pod: 'plain-1' });
  const result = await e2e.runtime.add(e2e.list, a);
  assert.equal((result.ips as unknown[]).length, 1);
  assert.equal(registrations('plain/plain-1').length, 0);
  await e2e.runtime.del(e2e.list, a);
});

test('a pod the broker refuses (it runs on another node) fails ADD with 101 and the broker\'s reason', { skip }, async () => {
  const ns = e2e.netns('o');
  const a = e2e.attachment(ns, { namespace: 'mesh', pod: 'elsewhere-1' });
  await assert.rejects(e2e.runtime.add(e2e.list, a), (err: unknown) => {
    assert.ok(err instanceof CniPluginError, String(err));
    assert.equal(err.result?.code, 101);
    assert.match(err.result?.msg ?? '', /HTTP 400/);
    assert.match(err.result?.details ?? '', /does not run on this node/);
    return true;
  });
  await e2e.runtime.del(e2e.list, a);
});

test('with the broker gone, ADD of an ambient pod fails with 11 and DEL still succeeds', { skip }, async () => {
  await stack!.stop();
  const ns = e2e.netns('g');
  const a = e2e.attachment(ns, { namespace: 'mesh', pod: 'web-1' });
  await assert.rejects(e2e.runtime.add(e2e.list, a), (err: unknown) => {
    assert.ok(err instanceof CniPluginError, String(err));
    assert.equal(err.plugin, 'istio-cni');
    assert.equal(err.result?.code, 11);
    assert.match(err.result?.msg ?? '', /cannot reach the node broker/);
    return true;
  });
  // The runtime cleans up after a failed ADD with DEL through the whole list.
  await e2e.runtime.del(e2e.list, a);
});
