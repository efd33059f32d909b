import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NodePods, podFacts, type PodFacts, type PodGoneReason } from '../../src/broker/index.js';

function recorder() {
  const calls: string[] = [];
  return {
    calls,
    retain: (identity: string, holder: string) => void calls.push(`retain ${identity} ${holder}`),
    release: (identity: string, holder: string) => void calls.push(`release ${identity} ${holder}`),
  };
}

const pod = (over: Partial<PodFacts> = {}): PodFacts => ({
  uid: 'u1',
  namespace: 'shop',
  name: 'cart-0',
  serviceAccount: 'cart',
  nodeName: 'node-1',
  hostNetwork: false,
  deleting: false,
  phase: 'Pending',
  ...over,
});

describe('NodePods', () => {
  it('retains the identity of an eligible pod once, idempotently', () => {
    const certs = recorder();
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => 0 });
    assert.equal(pods.upsert(pod()), 'eligible');
    assert.equal(pods.upsert(pod({ phase: 'Running' })), 'eligible');
    assert.deepEqual(certs.calls, ['retain spiffe://cluster.local/ns/shop/sa/cart u1']);
    assert.equal(pods.byKey('shop', 'cart-0')?.uid, 'u1');
    assert.equal(pods.byUid('u1')?.identity, 'spiffe://cluster.local/ns/shop/sa/cart');
  });

  it('gives nothing to host-network, terminating, finished or other-node pods, nor to the broker\'s own pod', () => {
    const certs = recorder();
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => 0, ownPodUid: 'self' });
    assert.equal(pods.upsert(pod({ uid: 'self' })), 'self');
    assert.equal(pods.upsert(pod({ uid: 'a', hostNetwork: true })), 'host-network');
    assert.equal(pods.upsert(pod({ uid: 'b', deleting: true })), 'terminating');
    assert.equal(pods.upsert(pod({ uid: 'c', phase: 'Succeeded' })), 'finished');
    assert.equal(pods.upsert(pod({ uid: 'd', nodeName: 'node-2' })), 'other-node');
    assert.deepEqual(certs.calls, []);
    assert.equal(pods.size, 0);
  });

  it('remembers pods of this node that get nothing (not other nodes\' pods), until they go or become eligible', () => {
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs: recorder(), now: () => 0, ownPodUid: 'self' });
    pods.upsert(pod({ uid: 'a', name: 'agent-0', hostNetwork: true }));
    pods.upsert(pod({ uid: 'self', name: 'broker-0' }));
    pods.upsert(pod({ uid: 'd', name: 'remote-0', nodeName: 'node-2' }));
    assert.equal(pods.ineligibleByUid('a')?.eligibility, 'host-network');
    assert.equal(pods.ineligibleByKey('shop', 'agent-0')?.uid, 'a');
    assert.equal(pods.ineligibleByUid('self')?.eligibility, 'self');
    assert.equal(pods.ineligibleByUid('d'), undefined, 'another node\'s pod is simply unknown');
    // The eligible pod that starts terminating is remembered as such; once deleted it is unknown.
    pods.upsert(pod({ uid: 'e', name: 'cart-1' }));
    assert.equal(pods.ineligibleByUid('e'), undefined);
    pods.upsert(pod({ uid: 'e', name: 'cart-1', deleting: true }));
    assert.equal(pods.ineligibleByKey('shop', 'cart-1')?.eligibility, 'terminating');
    pods.remove('e');
    assert.equal(pods.ineligibleByKey('shop', 'cart-1'), undefined);
    // A re-list without the host-network pod forgets it; a new UID under the name replaces the record.
    pods.replaceAll([pod({ uid: 'self', name: 'broker-0' }), pod({ uid: 'f', name: 'broker-0', phase: 'Failed' })]);
    assert.equal(pods.ineligibleByUid('a'), undefined);
    assert.equal(pods.ineligibleByKey('shop', 'broker-0')?.uid, 'f');
    assert.equal(pods.ineligibleByUid('self'), undefined, 'replaced under the same name');
  });

  it('ends streams and releases when a pod is deleted, starts terminating, or is replaced under the same name', () => {
    const certs = recorder();
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => 0 });
    const reasons: PodGoneReason[] = [];
    pods.upsert(pod());
    pods.onGone('u1', (r) => reasons.push(r));
    pods.upsert(pod({ uid: 'u2' })); // same ns/name, new UID
    assert.deepEqual(reasons, ['replaced']);
    pods.onGone('u2', (r) => reasons.push(r));
    pods.upsert(pod({ uid: 'u2', deleting: true }));
    assert.deepEqual(reasons, ['replaced', 'terminating']);
    pods.remove('u2'); // no-op now
    assert.deepEqual(certs.calls, [
      'retain spiffe://cluster.local/ns/shop/sa/cart u1',
      'release spiffe://cluster.local/ns/shop/sa/cart u1',
      'retain spiffe://cluster.local/ns/shop/sa/cart u2',
      'release spiffe://cluster.local/ns/shop/sa/cart u2',
    ]);
  });

  it('re-list removes pods that disappeared', () => {
    const certs = recorder();
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => 0 });
    pods.upsert(pod({ uid: 'a', name: 'a' }));
    pods.upsert(pod({ uid: 'b', name: 'b' }));
    pods.replaceAll([pod({ uid: 'b', name: 'b' }), pod({ uid: 'c', name: 'c', serviceAccount: 'other' })]);
    assert.deepEqual(pods.pods().map((p) => p.uid).sort(), ['b', 'c']);
    assert.ok(certs.calls.includes('release spiffe://cluster.local/ns/shop/sa/cart a'));
    assert.ok(certs.calls.includes('retain spiffe://cluster.local/ns/shop/sa/other c'));
  });

  it('a pod without a service account (a static pod\'s mirror) gets no identity, never `default`', () => {
    // What the API server holds for a mirror pod: the kubelet creates it from a static manifest,
    // it may not reference a service account, and ServiceAccount admission leaves it alone.
    const mirror = podFacts({
      metadata: { name: 'evil-node-1', namespace: 'payments', uid: 'm1', annotations: { 'kubernetes.io/config.mirror': 'abc' } },
      spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'x' }] },
      status: { phase: 'Running' },
    });
    assert.equal(mirror?.serviceAccount, '');
    const certs = recorder();
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => 0 });
    assert.equal(pods.upsert(mirror!), 'no-service-account');
    assert.deepEqual(certs.calls, [], 'no spiffe://cluster.local/ns/payments/sa/default');
    assert.equal(pods.size, 0);
    // An ordinary pod keeps the account the API server set.
    assert.equal(podFacts({ metadata: { name: 'a', namespace: 'n', uid: 'u' }, spec: { nodeName: 'node-1', serviceAccountName: 'default', containers: [] } })?.serviceAccount, 'default');
  });
});
