import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configSiblings, decidePrimary, selectPrimaryConfig, unloadableReason } from '../../../src/cni/install/index.js';

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

// decidePrimary: the same rule, but waiting while the lexically first file may be mid-write.
const LOOPBACK = JSON.stringify({ cniVersion: '1.0.0', name: 'lo', type: 'loopback' });

test('decidePrimary: an empty earlier file is waited for (a truncate before the write), not skipped', () => {
  const entries = [{ name: '10-calico.conflist', text: '' }, { name: '99-loopback.conf', text: LOOPBACK }];
  const d = decidePrimary(entries);
  assert.equal(d.kind, 'wait');
  assert.deepStrictEqual(d.kind === 'wait' && d.holdOn, { name: '10-calico.conflist', text: '' });
  // Given up on (with that same text): skipped as the runtime skips it.
  const past = decidePrimary(entries, { givenUp: new Map([['10-calico.conflist', '']]) });
  assert.equal(past.kind === 'use' && past.name, '99-loopback.conf');
  assert.deepStrictEqual(past.kind === 'use' && past.skipped.map((x) => x.name), ['10-calico.conflist']);
  // Written since it was given up on: waited for again.
  assert.equal(decidePrimary([{ name: '10-calico.conflist', text: ' ' }, entries[1]!], { givenUp: new Map([['10-calico.conflist', '']]) }).kind, 'wait');
  // A non-empty broken file that was never the primary is skipped at once, as before.
  assert.equal(decidePrimary([{ name: '00-broken.conflist', text: '{' }, { name: '99-loopback.conf', text: LOOPBACK }]).kind, 'use');
});

test('decidePrimary: the previous primary absent or unloadable is waited for, unless a new file sorts before it', () => {
  const loop = { name: '99-loopback.conf', text: LOOPBACK };
  const gone = decidePrimary([loop], { previous: '10-calico.conflist' });
  assert.equal(gone.kind, 'wait');
  assert.match(gone.kind === 'wait' ? gone.reason : '', /the primary 10-calico\.conflist is gone/);
  assert.deepStrictEqual(gone.kind === 'wait' && gone.holdOn, { name: '10-calico.conflist', text: undefined });
  const broken = decidePrimary([{ name: '10-calico.conflist', text: '{"name": "k8s' }, loop], { previous: '10-calico.conflist' });
  assert.match(broken.kind === 'wait' ? broken.reason : '', /the primary 10-calico\.conflist is not loadable/);
  // Its .conf sibling counts as the same primary (chaining turns X.conf into X.conflist).
  assert.equal(decidePrimary([{ name: '10-calico.conf', text: '{' }, loop], { previous: '10-calico.conflist' }).kind, 'wait');
  // A valid file that sorts before the previous primary preempts it (Istio's rule).
  assert.equal(decidePrimary([{ name: '05-new.conflist', text: LIST }], { previous: '10-calico.conflist' }).kind, 'use');
  // Present and valid: used.
  assert.deepStrictEqual(decidePrimary([{ name: '10-calico.conflist', text: LIST }, loop], { previous: '10-calico.conflist' }), {
    kind: 'use', name: '10-calico.conflist', skipped: [],
  });
  // Given up on while absent: the next valid file.
  assert.equal(decidePrimary([loop], { previous: '10-calico.conflist', givenUp: new Map([['10-calico.conflist', undefined]]) }).kind, 'use');
});

test('decidePrimary: a configured name waits while it is absent, empty or not loadable; nothing else is considered', () => {
  const loop = { name: '99-loopback.conf', text: LOOPBACK };
  for (const text of [undefined, '', '{"plugins": ']) {
    const entries = text === undefined ? [loop] : [{ name: '20-mine.conflist', text }, loop];
    const d = decidePrimary(entries, { configuredName: '20-mine.conflist' });
    assert.equal(d.kind, 'wait', String(text));
    assert.equal(d.kind === 'wait' && d.holdOn, undefined);
  }
  assert.equal(decidePrimary([{ name: '20-mine.conf', text: CONF }], { configuredName: '20-mine.conflist' }).kind, 'use');
  assert.deepStrictEqual(configSiblings('a.conf'), ['a.conf', 'a.conflist']);
  assert.deepStrictEqual(configSiblings('a.conflist'), ['a.conf', 'a.conflist']);
});
