import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TrustBundle } from '../../src/broker/index.js';
import { createRootCa } from '../../src/pki/index.js';

describe('TrustBundle', () => {
  it('starts from PEM roots, changes only when the set of roots changes, and tells listeners', async () => {
    const a = await createRootCa({ subject: 'CN=a', ttlSeconds: 3600 });
    const b = await createRootCa({ subject: 'CN=b', ttlSeconds: 3600 });
    const bundle = TrustBundle.fromPem('cluster.local', a.pem);
    const seen: number[] = [];
    bundle.onChange((roots) => seen.push(roots.length));
    assert.equal(bundle.update([Buffer.from(a.der)]), false, 'same set');
    assert.equal(bundle.update([Buffer.from(a.der), Buffer.from(a.der)]), false, 'duplicates collapse');
    assert.equal(bundle.update([Buffer.from(b.der), Buffer.from(a.der)]), true);
    assert.equal(bundle.update([Buffer.from(a.der), Buffer.from(b.der)]), false, 'order does not matter');
    assert.equal(bundle.update([]), false, 'an empty root list never empties the bundle');
    assert.deepEqual(seen, [2]);
    assert.equal(bundle.version, 1);
    assert.equal(bundle.concatenatedDer.length, a.der.length + b.der.length);
    assert.match(bundle.pem, /^(-----BEGIN CERTIFICATE-----\n[\s\S]+?-----END CERTIFICATE-----\n){2}$/);
  });

  it('refuses PEM without certificates', () => {
    assert.throws(() => TrustBundle.fromPem('cluster.local', 'nothing here'));
  });
});
