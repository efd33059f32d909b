/**
 * What the CA's pod informer indexes from a pod object: a mirror pod of a static pod (no
 * `spec.serviceAccountName`, which the apiserver leaves empty only for those) stands for no
 * service account, so it never lets a node agent impersonate `<ns>/default`.
 *
 * The devcluster defaults every created pod's service account (as the ServiceAccount admission
 * plugin does for ordinary pods) and has no kubelet that creates mirror pods, so the pod object
 * is built here as the apiserver stores a mirror pod.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { thrownCode } from './support/error-code.js';
import type { V1Pod } from '@kubernetes/client-node';
import { NodeAuthorizer, InMemoryPodIndex, toPodInfo, type Caller } from '../../src/ca/index.js';

const TD = 'cluster.local';

const ztunnel: V1Pod = {
  metadata: { namespace: 'istio-system', name: 'ztunnel-a', uid: 'z-uid' },
  spec: { serviceAccountName: 'ztunnel', nodeName: 'node-a', containers: [{ name: 'z', image: 'z' }] },
  status: { phase: 'Running' },
};

const mirror: V1Pod = {
  metadata: { namespace: 'payments', name: 'evil-node-a', uid: 'm-uid', annotations: { 'kubernetes.io/config.mirror': 'abc', 'kubernetes.io/config.source': 'file' } },
  spec: { nodeName: 'node-a', containers: [{ name: 'evil', image: 'evil' }] },
  status: { phase: 'Running' },
};

const caller: Caller = { namespace: 'istio-system', serviceAccount: 'ztunnel', podName: 'ztunnel-a', podUid: 'z-uid', clusterId: 'Kubernetes', authenticator: 'tokenreview' };

test('a pod without spec.serviceAccountName is indexed under no service account, never `default`', () => {
  const info = toPodInfo(mirror);
  assert.equal(info?.serviceAccountName, '');
  assert.equal(toPodInfo(ztunnel)?.serviceAccountName, 'ztunnel');
  assert.equal(toPodInfo({ metadata: { name: 'x' } }), undefined, 'no namespace: not indexed');
});

test('a mirror pod on the node does not authorize impersonating <ns>/default there', () => {
  const pods = new InMemoryPodIndex();
  for (const p of [ztunnel, mirror]) pods.upsert(toPodInfo(p)!);
  const authz = new NodeAuthorizer({ trustedNodeAccounts: ['istio-system/ztunnel'], trustDomains: [TD], pods });
  assert.equal(thrownCode(() => authz.authorize(caller, `spiffe://${TD}/ns/payments/sa/default`)), 'ERR_CA_NO_POD_ON_NODE');
  // An ordinary pod of payments/default on the node does authorize it.
  pods.upsert(toPodInfo({ ...mirror, metadata: { namespace: 'payments', name: 'real', uid: 'r' }, spec: { ...mirror.spec!, serviceAccountName: 'default' } })!);
  assert.equal(authz.authorize(caller, `spiffe://${TD}/ns/payments/sa/default`).serviceAccount, 'default');
});
