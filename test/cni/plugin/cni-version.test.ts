import { test } from 'node:test';
import assert from 'node:assert/strict';
import { convertResult, resultAddresses, versionAtLeast, SUPPORTED_VERSIONS } from '../../../src/cni/plugin/cni-version.js';
import { CniError } from '../../../src/cni/plugin/cni-error.js';

const v1 = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/p' }],
  ips: [
    { address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 0 },
    { address: 'fd00::5/64', gateway: 'fd00::1', interface: 0 },
  ],
  routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
  dns: { nameservers: ['10.96.0.10'] },
};

test('supported versions run from 0.1.0 to 1.1.0', () => {
  assert.deepEqual(SUPPORTED_VERSIONS, ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  assert.ok(versionAtLeast('1.1.0', '0.4.0'));
  assert.ok(!versionAtLeast('0.3.1', '0.4.0'));
  assert.ok(versionAtLeast('0.10.0', '0.4.0'));
});

test('a prevResult in the request version passes through unchanged, extra fields included', () => {
  const withExtra = { ...v1, vendorField: { x: 1 } };
  assert.deepEqual(convertResult(withExtra, '1.0.0'), withExtra);
});

test('a prevResult without cniVersion is taken as the request version', () => {
  const { cniVersion: _c, ...body } = v1;
  void _c;
  assert.deepEqual(convertResult(body, '1.1.0'), { ...body, cniVersion: '1.1.0' });
});

test('1.0.0 -> 0.4.0 adds ips[].version; 0.4.0 -> 1.1.0 removes it', () => {
  const as04 = convertResult(v1, '0.4.0');
  assert.equal(as04.cniVersion, '0.4.0');
  assert.deepEqual(
    (as04.ips as Array<Record<string, unknown>>).map((ip) => ip.version),
    ['4', '6'],
  );
  const back = convertResult(as04, '1.1.0');
  assert.equal(back.cniVersion, '1.1.0');
  assert.deepEqual(back.ips, v1.ips);
  assert.deepEqual(back.interfaces, v1.interfaces);
});

test('1.0.0 -> 0.2.0 keeps the first address per family with its routes', () => {
  const legacy = convertResult(v1, '0.2.0');
  assert.deepEqual(legacy, {
    cniVersion: '0.2.0',
    ip4: { ip: '10.244.0.5/24', gateway: '10.244.0.1', routes: [{ dst: '0.0.0.0/0' }] },
    ip6: { ip: 'fd00::5/64', gateway: 'fd00::1', routes: [{ dst: '::/0' }] },
    dns: v1.dns,
  });
  const up = convertResult(legacy, '1.0.0');
  assert.deepEqual(up.ips, [
    { address: '10.244.0.5/24', gateway: '10.244.0.1' },
    { address: 'fd00::5/64', gateway: 'fd00::1' },
  ]);
  assert.deepEqual(resultAddresses(legacy).map((a) => a.address), ['10.244.0.5/24', 'fd00::5/64']);
});

test('a prevResult of an unknown version is refused with code 1; a non-object with code 6', () => {
  assert.throws(
    () => convertResult({ ...v1, cniVersion: '9.9.9' }, '1.0.0'),
    (e: unknown) => e instanceof CniError && e.code === 'ERR_CNI_INCOMPATIBLE_VERSION' && e.wireCode === 1,
  );
  assert.throws(() => convertResult([1, 2], '1.0.0'), (e: unknown) => e instanceof CniError && e.wireCode === 6);
  assert.throws(() => convertResult({ cniVersion: 7 }, '1.0.0'), (e: unknown) => e instanceof CniError && e.wireCode === 6);
});
