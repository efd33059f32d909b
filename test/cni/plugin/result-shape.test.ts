/**
 * The result shape a prevResult must have (src/cni/plugin/result-shape.ts), per version family:
 * what real plugins produce passes, each kind of garbage is named.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cidrFamily, resultProblems } from '../../../src/cni/plugin/result-shape.js';

/** What Debian's bridge + host-local chain hands the next plugin (1.0.0), extra fields kept. */
const bridge = {
  cniVersion: '1.0.0',
  interfaces: [
    { name: 'cbr0', mac: '0a:58:0a:f4:00:01' },
    { name: 'veth1234', mac: '8e:1d:2f:3a:4b:5c' },
    { name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/pod' },
  ],
  ips: [{ address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 2 }, { address: 'fd00::5/64', interface: 2 }],
  routes: [{ dst: '0.0.0.0/0', gw: '10.244.0.1' }, { dst: '::/0', mtu: 1400, priority: 10 }],
  dns: { nameservers: ['10.96.0.10'], domain: 'cluster.local', search: ['svc.cluster.local'], options: ['ndots:5'] },
  vendor: { anything: [1, 2] },
};

test('real results of every family conform', () => {
  assert.deepEqual(resultProblems(bridge, 'v1'), []);
  assert.deepEqual(resultProblems({ ...bridge, ips: bridge.ips.map((ip) => ({ ...ip, version: ip.address.includes(':') ? '6' : '4' })) }, 'v03'), []);
  assert.deepEqual(resultProblems({ ip4: { ip: '10.1.0.5/16', gateway: '10.1.0.1', routes: [{ dst: '0.0.0.0/0' }] }, ip6: { ip: 'fd00::5/64' }, dns: {} }, 'legacy'), []);
  assert.deepEqual(resultProblems({}, 'v1'), [], 'every part is optional');
  assert.deepEqual(resultProblems({ ips: [{ address: '10.0.0.1/24', interface: 5 }] }, 'v1'), [], 'no interfaces list: an index cannot be checked');
});

test('each kind of garbage is named, with a short quote of the value', () => {
  assert.deepEqual(resultProblems({ ips: 7 }, 'v1'), ['ips is not an array (got 7)']);
  assert.deepEqual(resultProblems({ interfaces: 'eth0' }, 'v1'), ['interfaces is not an array (got "eth0")']);
  assert.deepEqual(resultProblems({ interfaces: [{}, 'x', { name: 'eth0', mac: 1, mtu: -1 }] }, 'v1'), [
    'interfaces[0].name is not a non-empty string (got undefined)',
    'interfaces[1] is not an object (got "x")',
    'interfaces[2].mac is not a string (got 1)',
    'interfaces[2].mtu is not a non-negative integer (got -1)',
  ]);
  assert.deepEqual(resultProblems({ ips: [{ address: '10.0.0.300/24', gateway: '10.0.0.1.5', interface: 'eth0' }, null] }, 'v1'), [
    'ips[0].address is not an address in CIDR notation (got "10.0.0.300/24")',
    'ips[0].gateway is not an IP address (got "10.0.0.1.5")',
    'ips[0].interface is not an interface index (got "eth0")',
    'ips[1] is not an object (got null)',
  ]);
  assert.deepEqual(resultProblems({ ips: [{ address: '10.0.0.1/24', version: '5' }] }, 'v03'), ['ips[0].version is not "4" or "6" (got "5")']);
  assert.deepEqual(resultProblems({ ips: [{ address: '10.0.0.1/24', version: '5' }] }, 'v1'), [], 'version is not a 1.x field');
  assert.deepEqual(resultProblems({ routes: [{ gw: '10.0.0.1' }, { dst: '0.0.0.0/0', table: 1.5 }] }, 'v1'), [
    'routes[0].dst is not an address in CIDR notation (got undefined)',
    'routes[1].table is not a non-negative integer (got 1.5)',
  ]);
  assert.deepEqual(resultProblems({ dns: { nameservers: '10.96.0.10', domain: 5 } }, 'v1'), [
    'dns.nameservers is not an array of strings (got "10.96.0.10")',
    'dns.domain is not a string (got 5)',
  ]);
  assert.deepEqual(resultProblems({ dns: [] }, 'v1'), ['dns is not an object (got [])']);
  assert.deepEqual(resultProblems({ ip4: '10.0.0.1/24', ip6: { ip: '10.0.0.1/24', routes: 'r' } }, 'legacy'), [
    'ip4 is not an object (got "10.0.0.1/24")',
    'ip6.ip is an IPv4 address (got "10.0.0.1/24")',
    'ip6.routes is not an array (got "r")',
  ]);
  const long = resultProblems({ ips: [{ address: 'x'.repeat(5000) }] }, 'v1')[0]!;
  assert.ok(long.length < 120, 'long values are cut');
});

test('CIDR: an address of either family with a prefix length its family allows', () => {
  assert.equal(cidrFamily('10.0.0.1/32'), 4);
  assert.equal(cidrFamily('fd00::1/128'), 6);
  assert.equal(cidrFamily('0.0.0.0/0'), 4);
  for (const bad of ['10.0.0.1/33', 'fd00::1/129', '10.0.0.1', '10.0.0.1/', '/24', 'host/24', '10.0.0.1/24/1', '10.0.0.1/-1', 7, null]) assert.equal(cidrFamily(bad), 0, String(bad));
});
