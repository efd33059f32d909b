/**
 * End to end for an IPv6-only sidecar pod: host-local hands out an address from a unique-local
 * /64, the plugin sees only IPv6 in prevResult and programs ip6tables as well (plus ::6 on lo, as
 * Istio's inbound passthrough source), and the traffic checks hold over IPv6: the app's outbound
 * connection lands on :15001, inbound to the app port on :15006.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { cniE2e, namespaceObject, networkNames6, sidecarPod } from './fixture.js';
import { hostClient, hostListener, podClient, startPodListeners } from './traffic.js';

const e2e = cniE2e({ name: 'v6', net: networkNames6('b'), ambient: false, objects: [namespaceObject('shop6'), sidecarPod('shop6', 'cart-v6')] });
const { skip, net } = e2e;

/** Addresses still in duplicate address detection cannot be bound or used yet. */
async function settled(exec: () => string): Promise<void> {
  for (let i = 0; i < 100 && /tentative/.test(exec()); i++) await delay(50);
}

test('IPv6-only pod: ip6tables rules in its namespace, outbound to :15001 and inbound to :15006 over IPv6', { skip }, async () => {
  const { runtime, list } = e2e;
  const netns = e2e.netns('6');
  const attachment = e2e.attachment(netns, { namespace: 'shop6', pod: 'cart-v6' });
  const result = await runtime.add(list, attachment);
  const ips = result.ips as Array<{ address: string }>;
  assert.equal(ips.length, 1);
  assert.match(ips[0]!.address, /^fd00:cb:/);
  const podIp = ips[0]!.address.split('/')[0]!;

  const v6 = netns.exec('ip6tables-save', []);
  assert.match(v6, /^-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001$/m);
  assert.match(v6, /^-A ISTIO_OUTPUT -s ::6\/128 -o lo -j RETURN$/m);
  assert.match(netns.exec('ip', ['-6', 'addr', 'show', 'dev', 'lo']), /inet6 ::6\/128/);

  await settled(() => netns.exec('ip', ['-6', 'addr', 'show', 'dev', 'eth0']));
  await settled(() => execFileSync('ip', ['-6', 'addr', 'show', 'dev', net.bridge], { encoding: 'utf8' }));
  const host = await hostListener(net.gateway, 18081, 'host-18081');
  e2e.defer(() => new Promise<void>((r) => host.close(() => r())));
  const listeners = await startPodListeners(netns.path, { 15001: 'proxy-outbound-15001', 15006: 'proxy-inbound-15006', 8080: 'app-8080' }, { uid: 1337, gid: 1337 });
  e2e.defer(() => listeners.stop());
  assert.equal(await podClient(netns.path, { host: net.gateway, port: 18081 }, { uid: 1000, gid: 1000 }), 'proxy-outbound-15001');
  assert.equal(await podClient(netns.path, { host: net.gateway, port: 18081 }, { uid: 1337, gid: 1337 }), 'host-18081');
  assert.equal(await hostClient({ host: podIp, port: 8080 }), 'proxy-inbound-15006');

  await runtime.del(list, attachment);
  assert.doesNotMatch(netns.exec('ip6tables-save', []), /ISTIO_/);
  assert.doesNotMatch(netns.exec('iptables-save', []), /ISTIO_/);
});
