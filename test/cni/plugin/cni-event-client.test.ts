import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toPodIpConfig } from '../../../src/cni/plugin/cni-event-client.js';

test('prevResult addresses become Istio IPConfig as Go encodes it (IP, base64 mask bytes, gateway)', () => {
  assert.deepEqual(toPodIpConfig({ address: '10.244.1.7/24', gateway: '10.244.1.1', interface: 0 }), {
    Interface: 0,
    Address: { IP: '10.244.1.7', Mask: Buffer.from([255, 255, 255, 0]).toString('base64') },
    Gateway: '10.244.1.1',
  });
  assert.equal(toPodIpConfig({ address: '10.244.1.7/24' })!.Address.Mask, '////AA==');
  assert.equal(toPodIpConfig({ address: '10.0.0.1/20' })!.Address.Mask, Buffer.from([255, 255, 240, 0]).toString('base64'));
  const v6 = toPodIpConfig({ address: 'fd00:10:244::7/64' })!;
  assert.equal(v6.Address.IP, 'fd00:10:244::7');
  assert.deepEqual([...Buffer.from(v6.Address.Mask, 'base64')], [...Array(8).fill(255), ...Array(8).fill(0)]);
  assert.equal(v6.Interface, null);
  assert.equal(v6.Gateway, null);
});

test('addresses that are not CIDRs are left out', () => {
  assert.equal(toPodIpConfig({ address: '10.244.1.7' }), undefined);
  assert.equal(toPodIpConfig({ address: '10.244.1.7/40' }), undefined);
});
