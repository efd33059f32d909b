import { test } from 'node:test';
import assert from 'node:assert/strict';
import { selectPrimaryConfig, unloadableReason } from '../../../src/cni/install/index.js';

const LIST = JSON.stringify({ cniVersion: '0.4.0', name: 'net', plugins: [{ type: 'bridge' }] });
const CONF = JSON.stringify({ cniVersion: '0.4.0', name: 'net', type: 'bridge' });

test('the lexically first loadable .conf/.conflist wins; unparseable ones are skipped', () => {
  const picked = selectPrimaryConfig([
    { name: '20-b.conflist', text: LIST },
    { name: '05-broken.conflist', text: '{' },
    { name: '00-empty.conflist', text: '{}' },
    { name: '01-array.conflist', text: '[]' },
    { name: '10-a.conf', text: CONF },
    { name: '00-readme.txt', text: 'hello' },
    { name: '00-kubeconfig', text: 'apiVersion: v1' },
  ]);
  assert.equal(picked?.name, '10-a.conf');
  assert.deepStrictEqual(picked?.skipped.map((s) => s.name), ['00-empty.conflist', '01-array.conflist', '05-broken.conflist']);
});

test('sorting is by bytes, not locale (upper case sorts before lower case)', () => {
  assert.equal(selectPrimaryConfig([{ name: 'a.conf', text: CONF }, { name: 'Z.conf', text: CONF }])?.name, 'Z.conf');
});

test('no candidates: undefined (the daemon waits)', () => {
  assert.equal(selectPrimaryConfig([]), undefined);
  assert.equal(selectPrimaryConfig([{ name: 'x.conflist', text: '[]' }]), undefined);
});

test('the extension decides the shape a runtime expects', () => {
  assert.match(unloadableReason({ name: 'a.conflist', text: CONF }) ?? '', /plugins/);
  assert.match(unloadableReason({ name: 'a.conf', text: LIST }) ?? '', /single plugin/);
  assert.match(unloadableReason({ name: 'a.conflist', text: JSON.stringify({ plugins: [{ type: 'x' }] }) }) ?? '', /name/);
  assert.equal(unloadableReason({ name: 'a.conflist', text: LIST }), undefined);
});

test('a file holding only istio-cni is not a primary network', () => {
  const ours = JSON.stringify({ cniVersion: '0.3.1', name: 'istio-cni', type: 'istio-cni' });
  const onlyOursList = JSON.stringify({ cniVersion: '0.3.1', name: 'x', plugins: [{ type: 'istio-cni' }] });
  const picked = selectPrimaryConfig([
    { name: '00-istio-cni.conf', text: ours },
    { name: '01-only-ours.conflist', text: onlyOursList },
    { name: '10-calico.conflist', text: LIST },
  ]);
  assert.equal(picked?.name, '10-calico.conflist');
  assert.equal(picked?.skipped.length, 2);
});

test('our own istio-owned file is never the primary', () => {
  const picked = selectPrimaryConfig(
    [{ name: '02-istio-cni.conflist', text: LIST }, { name: '10-calico.conflist', text: LIST }],
    { ownFileName: '02-istio-cni.conflist' },
  );
  assert.equal(picked?.name, '10-calico.conflist');
});

test('a configured name is used as is, or with the other extension', () => {
  const entries = [{ name: '10-a.conflist', text: LIST }, { name: '20-b.conflist', text: LIST }];
  assert.equal(selectPrimaryConfig(entries, { configuredName: '20-b.conflist' })?.name, '20-b.conflist');
  assert.equal(selectPrimaryConfig(entries, { configuredName: '20-b.conf' })?.name, '20-b.conflist');
  assert.equal(selectPrimaryConfig([{ name: '30-c.conf', text: CONF }], { configuredName: '30-c.conflist' })?.name, '30-c.conf');
  assert.equal(selectPrimaryConfig(entries, { configuredName: '99-missing.conflist' }), undefined);
});
