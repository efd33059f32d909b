/**
 * End to end for an IPv6-only sidecar pod: host-local hands out an address from a unique-local
 * /64, the plugin sees only IPv6 in prevResult and programs ip6tables as well (plus ::6 on lo, as
 * Istio's inbound passthrough source), and the traffic checks hold over IPv6: the app's outbound
 * connection lands on :15001, inbound to the app port on :15006.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'node:net';
import { execFileSync } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { CniRuntime, type Attachment, type Conflist } from '../../support/cni-runner.js';
import { seaBinaries } from '../../support/sea-binary.js';
import {
  Netns,
  cniBinDir,
  conflist,
  e2eUnavailable,
  namespaceObject,
  networkNames6,
  preserveIpForward,
  removeBridge,
  sidecarPod,
  startPluginCluster,
  type PluginCluster,
} from './fixture.js';
import { hostClient, hostListener, podClient, startPodListeners, type PodListeners } from './traffic.js';

const skip = e2eUnavailable();
const net = networkNames6('b');
let dir = '';
let pc: PluginCluster | undefined;
let netns: Netns | undefined;
let listeners: PodListeners | undefined;
let host: Server | undefined;
let runtime: CniRuntime;
let list: Conflist;
let attachment: Attachment;
let restoreIpForward: (() => void) | undefined;

before(async () => {
  if (skip) return;
  restoreIpForward = preserveIpForward();
  dir = mkdtempSync(join(tmpdir(), 'cni-e2e-v6-'));
  const bins = await seaBinaries();
  pc = await startPluginCluster(dir);
  await pc.cluster.apply([namespaceObject('shop6'), sidecarPod('shop6', 'cart-v6')]);
  runtime = new CniRuntime({ cniPath: [cniBinDir(dir, bins.istioCni)] });
  list = conflist(net, { ipamDir: join(dir, 'ipam'), runDir: pc.runDir, ambient: false });
  netns = new Netns(`cbcni-6-${process.pid}`);
  attachment = {
    containerId: `v6sandbox${process.pid}`,
    netns: netns.path,
    ifname: 'eth0',
    args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop6;K8S_POD_NAME=cart-v6',
  };
});

after(async () => {
  listeners?.stop();
  await new Promise<void>((r) => (host ? host.close(() => r()) : r()));
  if (netns) {
    await runtime.del(list, attachment).catch(() => undefined);
    netns.remove();
  }
  removeBridge(net.bridge);
  restoreIpForward?.();
  await pc?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Addresses still in duplicate address detection cannot be bound or used yet. */
async function settled(exec: () => string): Promise<void> {
  for (let i = 0; i < 100 && /tentative/.test(exec()); i++) await delay(50);
}

test('IPv6-only pod: ip6tables rules in its namespace, outbound to :15001 and inbound to :15006 over IPv6', { skip }, async () => {
  const result = await runtime.add(list, attachment);
  const ips = result.ips as Array<{ address: string }>;
  assert.equal(ips.length, 1);
  assert.match(ips[0]!.address, /^fd00:cb:/);
  const podIp = ips[0]!.address.split('/')[0]!;

  const v6 = netns!.exec('ip6tables-save', []);
  assert.match(v6, /^-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001$/m);
  assert.match(v6, /^-A ISTIO_OUTPUT -s ::6\/128 -o lo -j RETURN$/m);
  assert.match(netns!.exec('ip', ['-6', 'addr', 'show', 'dev', 'lo']), /inet6 ::6\/128/);

  await settled(() => netns!.exec('ip', ['-6', 'addr', 'show', 'dev', 'eth0']));
  await settled(() => execFileSync('ip', ['-6', 'addr', 'show', 'dev', net.bridge], { encoding: 'utf8' }));
  host = await hostListener(net.gateway, 18081, 'host-18081');
  listeners = await startPodListeners(netns!.path, { 15001: 'proxy-outbound-15001', 15006: 'proxy-inbound-15006', 8080: 'app-8080' }, { uid: 1337, gid: 1337 });
  assert.equal(await podClient(netns!.path, { host: net.gateway, port: 18081 }, { uid: 1000, gid: 1000 }), 'proxy-outbound-15001');
  assert.equal(await podClient(netns!.path, { host: net.gateway, port: 18081 }, { uid: 1337, gid: 1337 }), 'host-18081');
  assert.equal(await hostClient({ host: podIp, port: 8080 }), 'proxy-inbound-15006');

  await runtime.del(list, attachment);
  assert.doesNotMatch(netns!.exec('ip6tables-save', []), /ISTIO_/);
  assert.doesNotMatch(netns!.exec('iptables-save', []), /ISTIO_/);
});
