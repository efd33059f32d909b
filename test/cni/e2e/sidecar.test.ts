/**
 * End to end, as root, with real network namespaces: a conflist of Debian's bridge + host-local
 * chained with our istio-cni (the packaged single executable), executed the way a container
 * runtime does, for a sidecar pod read from the devcluster through the kubeconfig install-cni
 * writes. The redirect rules land in the pod's namespace; an app (uid 1000) connecting out lands
 * on the proxy's :15001, the proxy's own uid 1337 goes straight out, inbound traffic to the app
 * port lands on :15006. DEL takes the rules out; a second ADD puts exactly one copy back.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Attachment } from '../../support/cni-runner.js';
import { Netns, cniE2e, namespaceObject, networkNames, sidecarPod } from './fixture.js';
import { hostClient, hostListener, podClient, startPodListeners } from './traffic.js';

const APP = { uid: 1000, gid: 1000 };
const PROXY = { uid: 1337, gid: 1337 };
const HOST_PORT = 18080;

/** The pod the first four tests share. */
let netns: Netns;
let attachment: Attachment;
const e2e = cniE2e({
  name: 'sidecar',
  net: networkNames('s'),
  ambient: false,
  objects: [
    namespaceObject('shop'),
    sidecarPod('shop', 'cart-1'),
    sidecarPod('shop', 'cart-tproxy', { 'sidecar.istio.io/interceptionMode': 'TPROXY' }),
  ],
  prepare: (e2e) => {
    netns = e2e.netns('s');
    attachment = e2e.attachment(netns, { namespace: 'shop', pod: 'cart-1', args: 'K8S_POD_INFRA_CONTAINER_ID=sandbox;K8S_POD_UID=u-1' });
  },
});
const { skip, net } = e2e;

function istioLines(): string[] {
  return netns.exec('iptables-save', []).split('\n').filter((l) => l.includes('ISTIO_'));
}

let podIp = '';

test('ADD: bridge + host-local + istio-cni give the pod an address and Istio rules in its namespace', { skip }, async () => {
  const result = await e2e.runtime.add(e2e.list, attachment);
  assert.equal(result.cniVersion, '1.0.0');
  const ips = result.ips as Array<{ address: string; gateway: string }>;
  assert.equal(ips.length, 1);
  assert.ok(ips[0]!.address.startsWith(net.subnet.replace(/0\/24$/, '')), ips[0]!.address);
  assert.equal(ips[0]!.gateway, net.gateway);
  assert.ok(Array.isArray(result.interfaces), 'the bridge plugin result passes through');
  podIp = ips[0]!.address.split('/')[0]!;

  const rules = istioLines();
  assert.ok(rules.includes('-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001'), rules.join('\n'));
  assert.ok(rules.includes('-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006'), rules.join('\n'));
  assert.ok(rules.some((l) => /^-A OUTPUT .*-j ISTIO_OUTPUT/.test(l)));
  assert.ok(rules.some((l) => /^-A PREROUTING .*-j ISTIO_INBOUND/.test(l)));
  await e2e.runtime.check(e2e.list, attachment);
});

test('outbound: the app (uid 1000) lands on :15001, the proxy (uid 1337) goes out', { skip }, async () => {
  const host = await hostListener(net.gateway, HOST_PORT, 'host-18080');
  e2e.defer(() => new Promise<void>((r) => host.close(() => r())));
  const listeners = await startPodListeners(netns.path, { 15001: 'proxy-outbound-15001', 15006: 'proxy-inbound-15006', 8080: 'app-8080' }, PROXY);
  e2e.defer(() => listeners.stop());
  assert.equal(await podClient(netns.path, { host: net.gateway, port: HOST_PORT }, APP), 'proxy-outbound-15001');
  assert.equal(await podClient(netns.path, { host: net.gateway, port: HOST_PORT }, PROXY), 'host-18080');
});

test('inbound: a connection to the app port lands on :15006', { skip }, async () => {
  assert.equal(await hostClient({ host: podIp, port: 8080 }), 'proxy-inbound-15006');
});

test('DEL removes the rules and the interface; a second ADD programs exactly one copy again', { skip }, async () => {
  await e2e.runtime.del(e2e.list, attachment);
  assert.deepEqual(istioLines(), []);
  assert.doesNotMatch(netns.exec('ip', ['-o', 'link']), /eth0/);

  const again = await e2e.runtime.add(e2e.list, attachment);
  const ips = again.ips as Array<{ address: string }>;
  assert.equal(ips.length, 1);
  const rules = istioLines();
  assert.equal(rules.filter((l) => l === '-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001').length, 1);
  assert.equal(rules.filter((l) => /^-A OUTPUT .*-j ISTIO_OUTPUT/.test(l)).length, 1);
  assert.equal(await podClient(netns.path, { host: net.gateway, port: HOST_PORT }, APP), 'proxy-outbound-15001');
  // An ADD repeated on a namespace that still has the rules (no DEL in between) stays clean too.
  await e2e.runtime.add(e2e.list, { ...attachment, containerId: `${attachment.containerId}b`, ifname: 'eth1' });
  assert.equal(istioLines().filter((l) => /^-A OUTPUT .*-j ISTIO_OUTPUT/.test(l)).length, 1);
  await e2e.runtime.del(e2e.list, { ...attachment, containerId: `${attachment.containerId}b`, ifname: 'eth1' });
});

test('a TPROXY sidecar pod gets the mangle rules and the policy route; DEL takes both away', { skip }, async () => {
  const tproxyNetns = e2e.netns('t');
  const a = e2e.attachment(tproxyNetns, { namespace: 'shop', pod: 'cart-tproxy' });
  await e2e.runtime.add(e2e.list, a);
  const save = tproxyNetns.exec('iptables-save', []);
  assert.match(save, /^-A ISTIO_TPROXY .*-j TPROXY --on-port 15006 .*--tproxy-mark 0x539\/0xffffffff$/m);
  assert.match(save, /^-A PREROUTING -p tcp -j ISTIO_INBOUND$/m);
  assert.match(tproxyNetns.exec('ip', ['-4', 'rule', 'show']), /fwmark 0x539 lookup 133/);
  assert.match(tproxyNetns.exec('ip', ['-4', 'route', 'show', 'table', '133']), /local default dev lo/);

  await e2e.runtime.del(e2e.list, a);
  assert.doesNotMatch(tproxyNetns.exec('iptables-save', []), /ISTIO_|0x539|0x53a/);
  assert.doesNotMatch(tproxyNetns.exec('ip', ['-4', 'rule', 'show']), /lookup 133/);
});
