import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../../src/core/config.js';
import { buildRestorePlan, parseCidr, resolveIptablesConfig } from '../../../src/cni/iptables/index.js';

test('defaults are Istio defaults', () => {
  const c = resolveIptablesConfig({});
  assert.equal(c.proxyPort, 15001);
  assert.equal(c.inboundCapturePort, 15006);
  assert.equal(c.inboundTunnelPort, 15008);
  assert.deepEqual(c.proxyUID, ['1337']);
  assert.deepEqual(c.proxyGID, ['1337']);
  assert.equal(c.inboundInterceptionMode, 'REDIRECT');
  assert.equal(c.inboundTProxyMark, 1337);
  assert.equal(c.inboundTProxyRouteTable, 133);
  assert.deepEqual(c.ownerGroups, { mode: 'all-except', groups: [] });
  assert.equal(c.hostIPv4LoopbackCidr, '127.0.0.1/32');
  assert.ok(Object.isFrozen(c) && Object.isFrozen(c.proxyUID));
});

test('proxyGID defaults to the proxyUID list', () => {
  const c = resolveIptablesConfig({ proxyUID: '3,4' });
  assert.deepEqual(c.proxyGID, ['3', '4']);
});

test('every bad setting is reported at once, naming the setting and value', () => {
  try {
    resolveIptablesConfig({
      proxyPort: '70000',
      inboundInterceptionMode: 'tproxy',
      inboundPortsInclude: '80,http',
      outboundIPRangesInclude: '10.0.0.0/33,10.1.2.3',
      outboundIPRangesExclude: '*',
      excludeInterfaces: 'eth0;rm -rf',
      dnsServersV4: ['::1'],
      hostIPv4LoopbackCidr: '10.0.0.1/32',
      inboundTProxyMark: '-1',
    });
    assert.fail('expected ConfigError');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    assert.equal(err.code, 'ERR_CONFIG_INVALID');
    const text = err.problems.join('\n');
    for (const name of ['proxyPort', 'inboundInterceptionMode', 'inboundPortsInclude', 'outboundIPRangesInclude',
      'outboundIPRangesExclude', 'excludeInterfaces', 'dnsServersV4', 'hostIPv4LoopbackCidr', 'inboundTProxyMark']) {
      assert.match(text, new RegExp(`^${name}=`, 'm'), name);
    }
    assert.equal(err.problems.length, 10); // two bad CIDRs in one list are two problems
  }
});

test('more than 64 included owner groups is rejected', () => {
  const groups = Array.from({ length: 65 }, (_, i) => String(1000 + i)).join(',');
  assert.throws(() => resolveIptablesConfig({ ownerGroupsInclude: groups }), ConfigError);
  assert.doesNotThrow(() => resolveIptablesConfig({ ownerGroupsInclude: groups.split(',').slice(0, 64) }));
});

test('CIDRs print as Istio prints them', () => {
  assert.equal(parseCidr('10.1.2.3/8')?.text, '10.1.2.3/8');
  assert.equal(parseCidr('2001:DB8:0:0::/32')?.text, '2001:db8::/32');
  assert.equal(parseCidr('::1/128')?.loopback, true);
  assert.equal(parseCidr('127.1.2.3/32')?.loopback, true);
  assert.equal(parseCidr('010.0.0.0/8'), undefined);
  assert.equal(parseCidr('10.0.0.0'), undefined);
  assert.equal(parseCidr('fe80::1%eth0/64'), undefined);
});

test('TPROXY with IPv6 uses ::6 and ::1 in the v6 restore', () => {
  const plan = buildRestorePlan({ inboundPortsInclude: '*', inboundInterceptionMode: 'TPROXY', enableIPv6: true });
  assert.match(plan.v6, /^-I ISTIO_INBOUND 2 -p tcp -s ::6\/128 -i lo -j RETURN$/m);
  assert.match(plan.v6, /^-A ISTIO_TPROXY ! -d ::1\/128 -p tcp -j TPROXY/m);
  assert.doesNotMatch(plan.v6, /127\.0\.0\./);
});

test('DNS capture without servers and without capture-all is disabled, as in Istio', () => {
  const plan = buildRestorePlan({ redirectDNS: true });
  assert.doesNotMatch(plan.v4, /ISTIO_OUTPUT_DNS|\* raw/);
  const v6only = buildRestorePlan({ redirectDNS: true, enableIPv6: true, dnsServersV6: ['2001:4860:4860::8888'] });
  assert.match(v6only.v6, /-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d 2001:4860:4860::8888\/128 -j REDIRECT --to-port 15053/);
  assert.doesNotMatch(v6only.v4, /-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS/);
});
