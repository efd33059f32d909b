import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setHeaderOptions, PatchStrategy } from '@kubernetes/client-node';
import { createPodInformer } from '../../src/kube/index.js';
import {
  startCluster, adminClient, createPod, createServiceAccount, serviceAccountToken, kubeConfigFor, clientsFor,
  waitForPodRunning, deletePod, type DevCluster,
} from '../support/cluster.js';

let cluster: DevCluster;
before(async () => {
  cluster = await startCluster();
});
after(() => cluster.close());

test('client-node creates, reads, lists with selectors, patches and deletes pods', async () => {
  const { core } = adminClient(cluster);
  const pod = await createPod(cluster, { namespace: 'apps', name: 'web-1', serviceAccountName: 'web', nodeName: 'node-a', labels: { app: 'web' } });
  assert.equal(pod.spec?.serviceAccountName, 'web');
  assert.equal(pod.status?.phase, 'Pending');
  assert.match(pod.metadata?.uid ?? '', /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  await createPod(cluster, { namespace: 'apps', name: 'web-2', nodeName: 'node-b', labels: { app: 'web' } });
  await createPod(cluster, { namespace: 'apps', name: 'db-1', nodeName: 'node-a', labels: { app: 'db' } });

  const running = await waitForPodRunning(cluster, { namespace: 'apps', name: 'web-1' });
  assert.equal(running.status?.phase, 'Running');
  assert.match(running.status?.podIP ?? '', /^10\.244\./);

  const onA = await core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-a' });
  assert.deepEqual(onA.items.map((p) => p.metadata?.name).sort(), ['db-1', 'web-1']);
  const webOnA = await core.listNamespacedPod({ namespace: 'apps', fieldSelector: 'spec.nodeName=node-a', labelSelector: 'app in (web)' });
  assert.deepEqual(webOnA.items.map((p) => p.metadata?.name), ['web-1']);
  const bySa = await core.listPodForAllNamespaces({ fieldSelector: 'spec.serviceAccountName=default,metadata.namespace=apps' });
  assert.deepEqual(bySa.items.map((p) => p.metadata?.name).sort(), ['db-1', 'web-2']);

  const rvBefore = Number(running.metadata?.resourceVersion);
  const patched = await core.patchNamespacedPod(
    { namespace: 'apps', name: 'web-1', body: { metadata: { labels: { tier: 'front' } } } },
    k8sMergePatch(),
  );
  assert.equal(patched.metadata?.labels?.tier, 'front');
  assert.equal(patched.metadata?.labels?.app, 'web');
  assert.ok(Number(patched.metadata?.resourceVersion) > rvBefore);

  await deletePod(cluster, { namespace: 'apps', name: 'db-1', gracePeriodSeconds: 0 });
  await assert.rejects(core.readNamespacedPod({ namespace: 'apps', name: 'db-1' }), (err: { code?: number; body?: string }) => {
    assert.equal(err.code, 404);
    const status = JSON.parse(err.body ?? '{}') as { reason?: string; message?: string; kind?: string };
    assert.equal(status.kind, 'Status');
    assert.equal(status.reason, 'NotFound');
    assert.equal(status.message, 'pods "db-1" not found');
    return true;
  });
});

test('a service-account client is held to RBAC and gets the real 403 Status', async () => {
  await createServiceAccount(cluster, { namespace: 'rbac-test', name: 'reader' });
  const token = await serviceAccountToken(cluster, { namespace: 'rbac-test', serviceAccountName: 'reader' });
  const sa = clientsFor(kubeConfigFor(cluster, token));
  await assert.rejects(sa.core.listNamespacedPod({ namespace: 'x' }), (err: { code?: number; body?: string }) => {
    assert.equal(err.code, 403);
    const status = JSON.parse(err.body ?? '{}') as Record<string, unknown>;
    assert.deepEqual(status, {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'pods is forbidden: User "system:serviceaccount:rbac-test:reader" cannot list resource "pods" in API group "" in the namespace "x"',
      reason: 'Forbidden',
      details: { kind: 'pods' },
      code: 403,
    });
    return true;
  });
  const { rbac } = adminClient(cluster);
  await rbac.createNamespacedRole({ namespace: 'x-ns', body: { metadata: { name: 'pod-reader' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }] } }).catch(async (err: { code?: number }) => {
    assert.equal(err.code, 404); // namespace does not exist yet
    await adminClient(cluster).core.createNamespace({ body: { metadata: { name: 'x-ns' } } });
    await rbac.createNamespacedRole({ namespace: 'x-ns', body: { metadata: { name: 'pod-reader' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }] } });
  });
  await rbac.createNamespacedRoleBinding({
    namespace: 'x-ns',
    body: { metadata: { name: 'reader' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' }, subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: 'rbac-test' }] },
  });
  const list = await sa.core.listNamespacedPod({ namespace: 'x-ns' });
  assert.deepEqual(list.items, []);
  // The role is namespaced: other namespaces and other verbs stay forbidden.
  await assert.rejects(sa.core.listNamespacedPod({ namespace: 'apps' }), (err: { code?: number }) => err.code === 403);
  await assert.rejects(sa.core.readNamespacedPod({ namespace: 'x-ns', name: 'p' }), (err: { code?: number }) => err.code === 403);
});

/** client-node 1.x picks the patch content type through a middleware option. */
function k8sMergePatch() {
  return setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
}

test('simulated kubelet: hostNetwork pods get the node InternalIP; deleting a running pod marks it terminating, then removes it', async () => {
  const { core } = adminClient(cluster);
  await core.createNode({ body: { metadata: { name: 'node-ip' }, status: { addresses: [{ type: 'InternalIP', address: '192.0.2.10' }] } } });
  await createPod(cluster, { namespace: 'kubelet', name: 'host', nodeName: 'node-ip', hostNetwork: true });
  await createPod(cluster, { namespace: 'kubelet', name: 'normal', nodeName: 'node-ip' });
  const host = await waitForPodRunning(cluster, { namespace: 'kubelet', name: 'host' });
  const normal = await waitForPodRunning(cluster, { namespace: 'kubelet', name: 'normal' });
  assert.equal(host.status?.podIP, '192.0.2.10');
  assert.equal(host.status?.hostIP, '192.0.2.10');
  assert.notEqual(normal.status?.podIP, '192.0.2.10');
  assert.equal(normal.status?.containerStatuses?.[0]?.ready, true);
  assert.equal(normal.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');

  const seen: string[] = [];
  const informer = createPodInformer({
    kubeConfig: kubeConfigFor(cluster, cluster.adminToken),
    namespace: 'kubelet',
    onUpdate: (p) => seen.push(`update ${p.metadata?.name} ${p.metadata?.deletionTimestamp ? 'terminating' : 'live'}`),
    onDelete: (p) => seen.push(`delete ${p.metadata?.name}`),
  });
  informer.start();
  try {
    await informer.waitForSync();
    const marked = await core.deleteNamespacedPod({ namespace: 'kubelet', name: 'normal' });
    assert.ok(marked.metadata?.deletionTimestamp, 'the DELETE answer carries deletionTimestamp');
    for (let i = 0; i < 2000 && !seen.includes('delete normal'); i++) await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(seen, ['update normal terminating', 'delete normal']);
  } finally {
    await informer.stop();
  }
});

test('RBAC escalation prevention: roles and bindings only with permissions held, or with escalate/bind', async () => {
  const { rbac: adminRbac } = adminClient(cluster);
  await createServiceAccount(cluster, { namespace: 'esc', name: 'manager' });
  // The manager may manage Roles and RoleBindings in its namespace and read pods there, nothing else.
  await adminRbac.createNamespacedRole({
    namespace: 'esc',
    body: { metadata: { name: 'rbac-manager' }, rules: [{ apiGroups: ['rbac.authorization.k8s.io'], resources: ['roles', 'rolebindings'], verbs: ['create', 'update', 'patch', 'get'] }, { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }] },
  });
  await adminRbac.createNamespacedRoleBinding({
    namespace: 'esc',
    body: { metadata: { name: 'manager' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'rbac-manager' }, subjects: [{ kind: 'ServiceAccount', name: 'manager', namespace: 'esc' }] },
  });
  const manager = clientsFor(kubeConfigFor(cluster, await serviceAccountToken(cluster, { namespace: 'esc', serviceAccountName: 'manager' }))).rbac;

  // Within what it holds: fine.
  await manager.createNamespacedRole({ namespace: 'esc', body: { metadata: { name: 'pod-reader' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }] } });
  await manager.createNamespacedRoleBinding({
    namespace: 'esc',
    body: { metadata: { name: 'readers' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' }, subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: 'esc' }] },
  });
  // Beyond it: 403, for new rules, wildcards and bindings to bigger roles.
  const forbiddenGrant = (e: { code?: number; body?: string }) => e.code === 403 && /attempting to grant RBAC permissions not currently held/.test(JSON.parse(e.body ?? '{}').message);
  await assert.rejects(manager.createNamespacedRole({ namespace: 'esc', body: { metadata: { name: 'secrets' }, rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }] } }), forbiddenGrant);
  await assert.rejects(manager.createNamespacedRole({ namespace: 'esc', body: { metadata: { name: 'all-pods' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['*'] }] } }), forbiddenGrant);
  await assert.rejects(
    manager.createNamespacedRoleBinding({
      namespace: 'esc',
      body: { metadata: { name: 'admin' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' }, subjects: [{ kind: 'ServiceAccount', name: 'manager', namespace: 'esc' }] },
    }),
    forbiddenGrant,
  );
  // With `bind` on that role, the binding is allowed.
  await adminRbac.createNamespacedRole({ namespace: 'esc', body: { metadata: { name: 'binder' }, rules: [{ apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterroles'], verbs: ['bind'], resourceNames: ['view-secrets'] }] } });
  await adminRbac.createClusterRole({ body: { metadata: { name: 'view-secrets' }, rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }] } });
  await adminRbac.createNamespacedRoleBinding({
    namespace: 'esc',
    body: { metadata: { name: 'manager-binder' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'binder' }, subjects: [{ kind: 'ServiceAccount', name: 'manager', namespace: 'esc' }] },
  });
  await manager.createNamespacedRoleBinding({
    namespace: 'esc',
    body: { metadata: { name: 'secret-viewers' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view-secrets' }, subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: 'esc' }] },
  });
  const bindings = await adminRbac.listNamespacedRoleBinding({ namespace: 'esc' });
  assert.deepEqual(bindings.items.map((b) => b.metadata?.name).sort(), ['manager', 'manager-binder', 'readers', 'secret-viewers']);
});
