/**
 * End to end, as root, with real network namespaces: a conflist of Debian's bridge + host-local
 * chained with our istio-cni (the packaged single executable), executed the way a container
 * runtime does, for a sidecar pod read from the devcluster through the kubeconfig install-cni
 * writes. The redirect rules land in the pod's namespace; an app (uid 1000) connecting out lands
 * on the proxy's :15001, the proxy's own uid 1337 goes straight out, inbound traffic to the app
 * port lands on :15006. DEL takes the rules out; a second ADD puts exactly one copy back.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:net';
import { CniRuntime, type Attachment, type Conflist } from '../../support/cni-runner.js';
import { seaBinaries } from '../../support/sea-binary.js';
import {
  Netns,
  cniBinDir,
  conflist,
  e2eUnavailable,
  namespaceObject,
  networkNames,
  preserveIpForward,
  removeBridge,
  sidecarPod,
  startPluginCluster,
  type PluginCluster,
} from './fixture.js';
import { hostClient, hostListener, podClient, startPodListeners, type PodListeners } from './traffic.js';

const skip = e2eUnavailable();
const APP = { uid: 1000, gid: 1000 };
const PROXY = { uid: 1337, gid: 1337 };
const HOST_PORT = 18080;

let dir = '';
let pc: PluginCluster | undefined;
let netns: Netns | undefined;
let tproxyNetns: Netns | undefined;
let listeners: PodListeners | undefined;
let host: Server | undefined;
let runtime: CniRuntime;
let list: Conflist;
let attachment: Attachment;
const net = networkNames('s');

let restoreIpForward: (() => void) | undefined;

before(async () => {
  if (skip) return;
  restoreIpForward = preserveIpForward();
  dir = mkdtempSync(join(tmpdir(), 'cni-e2e-sidecar-'));
  const bins = await seaBinaries();
  if (bins.buildMs > 0) process.stdout.write(`# built the single executables in ${bins.buildMs} ms\n`);
  pc = await startPluginCluster(dir);
  await pc.cluster.apply([
    namespaceObject('shop'),
    sidecarPod('shop', 'cart-1'),
    sidecarPod('shop', 'cart-tproxy', { 'sidecar.istio.io/interceptionMode': 'TPROXY' }),
  ]);
  runtime = new CniRuntime({ cniPath: [cniBinDir(dir, bins.istioCni)] });
  list = conflist(net, { ipamDir: join(dir, 'ipam'), runDir: pc.runDir, ambient: false });
  netns = new Netns(`cbcni-s-${process.pid}`);
  attachment = {
    containerId: `sandbox${process.pid}`,
    netns: netns.path,
    ifname: 'eth0',
    args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1;K8S_POD_INFRA_CONTAINER_ID=sandbox;K8S_POD_UID=u-1',
  };
});

after(async () => {
  listeners?.stop();
  await new Promise<void>((r) => (host ? host.close(() => r()) : r()));
  if (netns) {
    await runtime.del(list, attachment).catch(() => undefined);
    netns.remove();
  }
  tproxyNetns?.remove();
  removeBridge(net.bridge);
  restoreIpForward?.();
  await pc?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function istioLines(): string[] {
  return netns!.exec('iptables-save', []).split('\n').filter((l) => l.includes('ISTIO_'));
}

let podIp = '';

test('ADD: bridge + host-local + istio-cni give the pod an address and Istio rules in its namespace', { skip }, async () => {
  const result = await runtime.add(list, attachment);
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
  await runtime.check(list, attachment);
});

test('outbound: the app (uid 1000) lands on :15001, the proxy (uid 1337) goes out', { skip }, async () => {
  host = await hostListener(net.gateway, HOST_PORT, 'host-18080');
  listeners = await startPodListeners(netns!.path, { 15001: 'proxy-outbound-15001', 15006: 'proxy-inbound-15006', 8080: 'app-8080' }, PROXY);
  assert.equal(await podClient(netns!.path, { host: net.gateway, port: HOST_PORT }, APP), 'proxy-outbound-15001');
  assert.equal(await podClient(netns!.path, { host: net.gateway, port: HOST_PORT }, PROXY), 'host-18080');
});

test('inbound: a connection to the app port lands on :15006', { skip }, async () => {
  assert.equal(await hostClient({ host: podIp, port: 8080 }), 'proxy-inbound-15006');
});

test('DEL removes the rules and the interface; a second ADD programs exactly one copy again', { skip }, async () => {
  await runtime.del(list, attachment);
  assert.deepEqual(istioLines(), []);
  assert.doesNotMatch(netns!.exec('ip', ['-o', 'link']), /eth0/);

  const again = await runtime.add(list, attachment);
  const ips = again.ips as Array<{ address: string }>;
  assert.equal(ips.length, 1);
  const rules = istioLines();
  assert.equal(rules.filter((l) => l === '-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001').length, 1);
  assert.equal(rules.filter((l) => /^-A OUTPUT .*-j ISTIO_OUTPUT/.test(l)).length, 1);
  assert.equal(await podClient(netns!.path, { host: net.gateway, port: HOST_PORT }, APP), 'proxy-outbound-15001');
  // An ADD repeated on a namespace that still has the rules (no DEL in between) stays clean too.
  await runtime.add(list, { ...attachment, containerId: `${attachment.containerId}b`, ifname: 'eth1' });
  assert.equal(istioLines().filter((l) => /^-A OUTPUT .*-j ISTIO_OUTPUT/.test(l)).length, 1);
  await runtime.del(list, { ...attachment, containerId: `${attachment.containerId}b`, ifname: 'eth1' });
});

test('a TPROXY sidecar pod gets the mangle rules and the policy route; DEL takes both away', { skip }, async () => {
  tproxyNetns = new Netns(`cbcni-t-${process.pid}`);
  const a: Attachment = {
    containerId: `tproxy${process.pid}`,
    netns: tproxyNetns.path,
    ifname: 'eth0',
    args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-tproxy',
  };
  await runtime.add(list, a);
  const save = tproxyNetns.exec('iptables-save', []);
  assert.match(save, /^-A ISTIO_TPROXY .*-j TPROXY --on-port 15006 .*--tproxy-mark 0x539\/0xffffffff$/m);
  assert.match(save, /^-A PREROUTING -p tcp -j ISTIO_INBOUND$/m);
  assert.match(tproxyNetns.exec('ip', ['-4', 'rule', 'show']), /fwmark 0x539 lookup 133/);
  assert.match(tproxyNetns.exec('ip', ['-4', 'route', 'show', 'table', '133']), /local default dev lo/);

  await runtime.del(list, a);
  assert.doesNotMatch(tproxyNetns.exec('iptables-save', []), /ISTIO_|0x539|0x53a/);
  assert.doesNotMatch(tproxyNetns.exec('ip', ['-4', 'rule', 'show']), /lookup 133/);
});
