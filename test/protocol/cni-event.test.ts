/**
 * Istio's CNIPluginAddEvent (src/protocol/cni-event.ts): the bytes the plugin sends, and what the
 * broker's decoder accepts — including what Go's encoder writes for Istio's own plugin.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeCniAddEvent, encodeCniAddEvent, toPodIpConfig, type CniPluginAddEvent } from '../../src/protocol/cni-event.js';

test('prevResult addresses become Istio IPConfig as Go encodes it (IP, base64 mask bytes, gateway)', () => {
  assert.deepEqual(toPodIpConfig({ address: '10.244.1.7/24', gateway: '10.244.1.1', interface: 0 }), {
    Interface: 0,
    Address: { IP: '10.244.1.7', Mask: Buffer.from([255, 255, 255, 0]).toString('base64') },
    Gateway: '10.244.1.1',
  });
  assert.equal(toPodIpConfig({ address: '10.244.1.7/24' })!.Address!.Mask, '////AA==');
  assert.equal(toPodIpConfig({ address: '10.0.0.1/20' })!.Address!.Mask, Buffer.from([255, 255, 240, 0]).toString('base64'));
  const v6 = toPodIpConfig({ address: 'fd00:10:244::7/64' })!;
  assert.equal(v6.Address!.IP, 'fd00:10:244::7');
  assert.deepEqual([...Buffer.from(v6.Address!.Mask!, 'base64')], [...Array(8).fill(255), ...Array(8).fill(0)]);
  assert.equal(v6.Interface, null);
  assert.equal(v6.Gateway, null);
});

test('addresses that are not CIDRs are left out', () => {
  assert.equal(toPodIpConfig({ address: '10.244.1.7' }), undefined);
  assert.equal(toPodIpConfig({ address: '10.244.1.7/40' }), undefined);
});

test('the body is written in Go field order, whatever order the object was built in', () => {
  const event: CniPluginAddEvent = {
    IPs: [{ Gateway: '10.244.1.1', Address: { Mask: '////AA==', IP: '10.244.1.7' }, Interface: 0 }],
    PodNamespace: 'mesh',
    PodName: 'web-1',
    Netns: '/var/run/netns/x',
  };
  assert.equal(
    encodeCniAddEvent(event),
    '{"Netns":"/var/run/netns/x","PodName":"web-1","PodNamespace":"mesh","IPs":[{"Interface":0,"Address":{"IP":"10.244.1.7","Mask":"////AA=="},"Gateway":"10.244.1.1"}]}',
  );
  assert.equal(encodeCniAddEvent({ Netns: '', PodName: 'a', PodNamespace: 'b', IPs: null }), '{"Netns":"","PodName":"a","PodNamespace":"b","IPs":null}');
});

test('what the plugin encodes, the broker decodes to the same event', () => {
  const event: CniPluginAddEvent = {
    Netns: '/var/run/netns/cni-1',
    PodName: 'web-1',
    PodNamespace: 'mesh',
    IPs: [toPodIpConfig({ address: '10.244.1.7/24', gateway: '10.244.1.1', interface: 2 })!, toPodIpConfig({ address: 'fd00::7/64' })!],
  };
  assert.deepEqual(decodeCniAddEvent(encodeCniAddEvent(event)), { ok: true, event });
});

test("Go's encoding of an empty gateway (\"\") and a nil mask (null), and absent fields, are accepted", () => {
  const decoded = decodeCniAddEvent('{"PodName":"web-1","PodNamespace":"mesh","IPs":[{"Interface":null,"Address":{"IP":"10.0.0.5","Mask":null},"Gateway":""},{}]}');
  assert.deepEqual(decoded, {
    ok: true,
    event: {
      Netns: '',
      PodName: 'web-1',
      PodNamespace: 'mesh',
      IPs: [
        { Interface: null, Address: { IP: '10.0.0.5', Mask: null }, Gateway: '' },
        { Interface: null, Address: null, Gateway: null },
      ],
    },
  });
});

test('bodies that are not a CNIPluginAddEvent name their first problem', () => {
  const problem = (body: string) => {
    const d = decodeCniAddEvent(body);
    return d.ok ? undefined : d.problem;
  };
  assert.equal(problem('{'), 'body is not JSON');
  assert.equal(problem('[]'), 'body is not a JSON object');
  assert.equal(problem('{"PodName":5}'), 'PodName is missing or not a pod name');
  assert.equal(problem('{"PodName":"a","PodNamespace":"Upper"}'), 'PodNamespace is missing or not a namespace name');
  assert.equal(problem('{"PodName":"a","PodNamespace":"b","Netns":1}'), 'Netns must be a string');
  assert.equal(problem('{"PodName":"a","PodNamespace":"b","IPs":{}}'), 'IPs must be an array or null');
  assert.equal(problem('{"PodName":"a","PodNamespace":"b","IPs":[5]}'), 'IPs[0] is not an object');
  assert.equal(problem('{"PodName":"a","PodNamespace":"b","IPs":[{"Interface":"eth0"}]}'), 'IPs[0].Interface must be an integer or null');
  assert.equal(problem('{"PodName":"a","PodNamespace":"b","IPs":[{"Address":{"IP":7}}]}'), 'IPs[0].Address.IP must be a string');
  assert.equal(problem('{"PodName":"a","PodNamespace":"b","IPs":[{"Gateway":false}]}'), 'IPs[0].Gateway must be a string or null');
});
