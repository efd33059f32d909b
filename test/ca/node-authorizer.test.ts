import { test } from 'node:test';
import assert from 'node:assert/strict';
import { thrownCode } from './support/error-code.js';
import { CompactPodIndex, NodeAuthorizer, InMemoryPodIndex, type PodInfo, type Caller } from '../../src/ca/index.js';

const TD = 'cluster.local';

function pod(p: Partial<PodInfo> & Pick<PodInfo, 'name' | 'namespace'>): PodInfo {
  return { uid: `${p.name}-uid`, serviceAccountName: 'default', nodeName: 'node-a', phase: 'Running', ...p };
}

// Every case on the map index (the authorizer's by-name path) and on the compact index (its slot path with caller notes).
const INDEXES: ReadonlyArray<readonly [string, () => InMemoryPodIndex | CompactPodIndex]> = [
  ['map index', () => new InMemoryPodIndex()],
  ['compact index', () => new CompactPodIndex()],
];

for (const [kind, make] of INDEXES) {
  function setup(trusted: readonly string[] = ['istio-system/ztunnel']) {
    const pods = make();
    pods.upsert(pod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccountName: 'ztunnel', nodeName: 'node-a' }));
    const authz = new NodeAuthorizer({ trustedNodeAccounts: trusted, trustDomains: [TD], pods });
    const caller: Caller = {
      namespace: 'istio-system',
      serviceAccount: 'ztunnel',
      podName: 'ztunnel-a',
      podUid: 'ztunnel-a-uid',
      clusterId: 'Kubernetes',
      authenticator: 'tokenreview',
    };
    return { pods, authz, caller };
  }

  const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;

  test(`${kind}: pod of the requested SA on the caller node: allowed`, () => {
    const { pods, authz, caller } = setup();
    pods.upsert(pod({ namespace: 'default', name: 'sleep-1', serviceAccountName: 'sleep', nodeName: 'node-a' }));
    const id = authz.authorize(caller, SLEEP);
    assert.equal(id.namespace, 'default');
    assert.equal(id.serviceAccount, 'sleep');
    assert.equal(id.id, SLEEP);
  });

  test(`${kind}: empty trusted list denies everyone`, () => {
    const { pods, authz, caller } = setup([]);
    pods.upsert(pod({ namespace: 'default', name: 'sleep-1', serviceAccountName: 'sleep', nodeName: 'node-a' }));
    assert.equal(thrownCode(() => authz.authorize(caller, SLEEP)), 'ERR_CA_NODE_NOT_TRUSTED');
  });

  test(`${kind}: no pod of the requested SA anywhere: denied`, () => {
    const { authz, caller } = setup();
    assert.equal(thrownCode(() => authz.authorize(caller, SLEEP)), 'ERR_CA_NO_POD_ON_NODE');
  });

  test(`${kind}: pod only on another node: denied; pods on both nodes: allowed`, () => {
    const { pods, authz, caller } = setup();
    pods.upsert(pod({ namespace: 'default', name: 'sleep-b', serviceAccountName: 'sleep', nodeName: 'node-b' }));
    assert.equal(thrownCode(() => authz.authorize(caller, SLEEP)), 'ERR_CA_NO_POD_ON_NODE');
    pods.upsert(pod({ namespace: 'default', name: 'sleep-a', serviceAccountName: 'sleep', nodeName: 'node-a' }));
    assert.equal(authz.authorize(caller, SLEEP).id, SLEEP);
  });

  test(`${kind}: failed or completed pods do not count`, () => {
    const { pods, authz, caller } = setup();
    pods.upsert(pod({ namespace: 'default', name: 'sleep-1', serviceAccountName: 'sleep', nodeName: 'node-a', phase: 'Failed' }));
    pods.upsert(pod({ namespace: 'default', name: 'sleep-2', serviceAccountName: 'sleep', nodeName: 'node-a', phase: 'Succeeded' }));
    assert.equal(thrownCode(() => authz.authorize(caller, SLEEP)), 'ERR_CA_NO_POD_ON_NODE');
    pods.upsert(pod({ namespace: 'default', name: 'sleep-3', serviceAccountName: 'sleep', nodeName: 'node-a', phase: 'Pending' }));
    assert.equal(authz.authorize(caller, SLEEP).id, SLEEP);
  });

  test(`${kind}: a pod that moves off the node stops counting (index follows updates and deletes)`, () => {
    const { pods, authz, caller } = setup();
    pods.upsert(pod({ namespace: 'default', name: 'sleep-1', serviceAccountName: 'sleep', nodeName: 'node-a' }));
    assert.equal(authz.authorize(caller, SLEEP).id, SLEEP);
    pods.remove({ namespace: 'default', name: 'sleep-1' });
    assert.equal(thrownCode(() => authz.authorize(caller, SLEEP)), 'ERR_CA_NO_POD_ON_NODE');
  });

  test(`${kind}: requested identity must be a Kubernetes SPIFFE ID in our trust domain`, () => {
    const { pods, authz, caller } = setup();
    pods.upsert(pod({ namespace: 'default', name: 'sleep-1', serviceAccountName: 'sleep', nodeName: 'node-a' }));
    for (const bad of ['sleep', 'https://cluster.local/ns/default/sa/sleep', `spiffe://${TD}/sa/sleep`, `spiffe://${TD}/ns/default/sa/sleep/x`, 'spiffe://other.domain/ns/default/sa/sleep', `spiffe://${TD}/ns/Default/sa/sleep`]) {
      assert.equal(thrownCode(() => authz.authorize(caller, bad)), 'ERR_CA_IDENTITY_INVALID', bad);
    }
  });

  test(`${kind}: caller pod checks: missing, UID mismatch, SA mismatch, not pod-bound`, () => {
    const { pods, authz, caller } = setup();
    pods.upsert(pod({ namespace: 'default', name: 'sleep-1', serviceAccountName: 'sleep', nodeName: 'node-a' }));
    assert.equal(thrownCode(() => authz.authorize({ ...caller, podName: 'ztunnel-gone' }, SLEEP)), 'ERR_CA_CALLER_POD_MISSING');
    assert.equal(thrownCode(() => authz.authorize({ ...caller, podUid: 'other-uid' }, SLEEP)), 'ERR_CA_CALLER_POD_UID_MISMATCH');
    pods.upsert(pod({ namespace: 'istio-system', name: 'imposter', serviceAccountName: 'default', nodeName: 'node-a' }));
    assert.equal(
      thrownCode(() => authz.authorize({ ...caller, podName: 'imposter', podUid: 'imposter-uid' }, SLEEP)),
      'ERR_CA_CALLER_POD_SA_MISMATCH',
    );
    const { podName: _n, podUid: _u, ...unbound } = caller;
    assert.equal(thrownCode(() => authz.authorize(unbound, SLEEP)), 'ERR_CA_CALLER_NOT_POD_BOUND');
  });

  test(`${kind}: not synced yet: denied rather than guessing`, () => {
    const { pods, authz, caller } = setup();
    pods.upsert(pod({ namespace: 'default', name: 'sleep-1', serviceAccountName: 'sleep', nodeName: 'node-a' }));
    pods.markSynced(false);
    assert.equal(thrownCode(() => authz.authorize(caller, SLEEP)), 'ERR_CA_POD_INDEX_NOT_SYNCED');
  });

  test(`${kind}: untrusted caller of another namespace with the same SA name is not trusted`, () => {
    const { authz, caller } = setup();
    assert.equal(thrownCode(() => authz.authorize({ ...caller, namespace: 'default' }, SLEEP)), 'ERR_CA_NODE_NOT_TRUSTED');
  });

  test(`${kind}: a trusted registration authority may have any identity of the trust domain without the node check, still pod-bound to its own existing pod`, () => {
    const pods = make();
    pods.upsert(pod({ namespace: 'istio-system', name: 'ra-0', serviceAccountName: 'certbroker-ra', nodeName: 'node-z' }));
    pods.upsert(pod({ namespace: 'default', name: 'sleep-b', serviceAccountName: 'sleep', nodeName: 'node-b' }));
    const ra: Caller = { namespace: 'istio-system', serviceAccount: 'certbroker-ra', podName: 'ra-0', podUid: 'ra-0-uid', clusterId: 'Kubernetes', authenticator: 'tokenreview' };
    const plain = new NodeAuthorizer({ trustedNodeAccounts: ['istio-system/ztunnel'], trustDomains: [TD], pods });
    assert.equal(thrownCode(() => plain.authorize(ra, SLEEP)), 'ERR_CA_NODE_NOT_TRUSTED', 'not listed: refused');
    const asNodeAgent = new NodeAuthorizer({ trustedNodeAccounts: ['istio-system/certbroker-ra'], trustDomains: [TD], pods });
    assert.equal(thrownCode(() => asNodeAgent.authorize(ra, SLEEP)), 'ERR_CA_NO_POD_ON_NODE', 'as a node agent it is tied to its node');
    const authz = new NodeAuthorizer({ trustedNodeAccounts: [], trustedRegistrationAuthorities: ['istio-system/certbroker-ra'], trustDomains: [TD], pods });
    assert.equal(authz.authorize(ra, SLEEP).id, SLEEP, 'a pod of sleep on another node than the RA');
    assert.equal(authz.authorize(ra, `spiffe://${TD}/ns/nowhere/sa/nobody`).id, `spiffe://${TD}/ns/nowhere/sa/nobody`, 'the RA authorized its caller; no pod needed here');
    assert.equal(thrownCode(() => authz.authorize(ra, 'spiffe://other.td/ns/default/sa/sleep')), 'ERR_CA_IDENTITY_INVALID', 'our trust domain only');
    assert.equal(thrownCode(() => authz.authorize({ ...ra, podName: undefined, podUid: undefined }, SLEEP)), 'ERR_CA_CALLER_NOT_POD_BOUND');
    assert.equal(thrownCode(() => authz.authorize({ ...ra, podUid: 'old-uid' }, SLEEP)), 'ERR_CA_CALLER_POD_UID_MISMATCH');
    assert.equal(authz.authorizeNodeAgent(ra).name, 'ra-0', 'its own SVID may carry serving names');
    pods.remove({ namespace: 'istio-system', name: 'ra-0' });
    assert.equal(thrownCode(() => authz.authorize(ra, SLEEP)), 'ERR_CA_CALLER_POD_MISSING', 'an RA whose pod is gone is refused');
  });
}

test('compact index: more distinct requested identities than 4096 stay parsed (no full parse per call), and the cache stays bounded', () => {
  const pods = new CompactPodIndex();
  pods.upsert(pod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccountName: 'ztunnel', nodeName: 'node-a' }));
  const ACCOUNTS = 6000;
  for (let k = 0; k < ACCOUNTS; k++) pods.upsert(pod({ namespace: `team-${k % 50}`, name: `w-${k}`, serviceAccountName: `sa-${k}`, nodeName: 'node-a' }));
  const authz = new NodeAuthorizer({ trustedNodeAccounts: ['istio-system/ztunnel'], trustDomains: [TD], pods });
  const caller: Caller = { namespace: 'istio-system', serviceAccount: 'ztunnel', podName: 'ztunnel-a', podUid: 'ztunnel-a-uid', clusterId: 'Kubernetes', authenticator: 'tokenreview' };
  const identity = (k: number) => `spiffe://${TD}/ns/team-${k % 50}/sa/sa-${k}`;
  for (let pass = 0; pass < 3; pass++) {
    for (let k = 0; k < ACCOUNTS; k++) assert.equal(authz.authorize(caller, identity(k)).serviceAccount, `sa-${k}`);
  }
  assert.equal(authz.identityCache.parses, ACCOUNTS, 'each identity parsed once over three passes in order');
  assert.ok(authz.identityCache.limit >= ACCOUNTS + 1, `limit ${authz.identityCache.limit} follows the index's accounts`);
  // Identities no pod runs as (refused) do not grow it past its bound, and decisions stay the same.
  for (let k = 0; k < 40_000; k++) assert.equal(thrownCode(() => authz.authorize(caller, `spiffe://${TD}/ns/nowhere/sa/x-${k}`)), 'ERR_CA_NO_POD_ON_NODE');
  assert.ok(authz.identityCache.held <= 2 * authz.identityCache.limit, `held ${authz.identityCache.held}`);
  assert.equal(authz.authorize(caller, identity(1)).serviceAccount, 'sa-1');
  pods.remove({ namespace: 'team-1', name: 'w-1' });
  assert.equal(thrownCode(() => authz.authorize(caller, identity(1))), 'ERR_CA_NO_POD_ON_NODE', 'a kept identity is still checked against the node every call');
});
