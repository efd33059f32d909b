/**
 * RBAC proven: the exact RBAC objects rendered from deploy/ are loaded into the devcluster,
 * which enforces them for service-account callers. For each account the test shows what it
 * can do (its code paths need it) and what it must NOT be able to do — through
 * SelfSubjectAccessReview and through real requests with the account's own token.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { brokerRbacObjects } from '../../src/broker/index.js';
import {
  adminClient,
  clientsFor,
  createPod,
  kubeConfigFor,
  serviceAccountToken,
  startCluster,
  type Clients,
  type DevCluster,
} from '../support/cluster.js';
import { findObject, identityObjects, renderDeploy, type K8sObject } from './manifests.js';
import { kubectlMissing } from '../support/tools.js';

const NS = 'istio-system';
let cluster: DevCluster;
const clients = new Map<string, Clients>();

function as(sa: string): Clients {
  const c = clients.get(sa);
  if (c === undefined) throw new Error(`no client for ${sa}`);
  return c;
}

interface Access {
  readonly verb: string;
  readonly resource: string;
  readonly group?: string;
  readonly subresource?: string;
  readonly namespace?: string;
  readonly name?: string;
}

async function allowed(sa: string, a: Access): Promise<boolean> {
  const res = await as(sa).authz.createSelfSubjectAccessReview({
    body: {
      spec: {
        resourceAttributes: {
          verb: a.verb,
          resource: a.resource,
          group: a.group ?? '',
          ...(a.subresource !== undefined ? { subresource: a.subresource } : {}),
          ...(a.namespace !== undefined ? { namespace: a.namespace } : {}),
          ...(a.name !== undefined ? { name: a.name } : {}),
        },
      },
    },
  });
  return res.status?.allowed === true;
}

function describe(a: Access): string {
  const res = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  return `${a.verb} ${a.group ? `${a.group}/` : ''}${res}${a.name ? ` ${a.name}` : ''}${a.namespace ? ` in ${a.namespace}` : ' (cluster)'}`;
}

async function checkMatrix(sa: string, can: readonly Access[], cannot: readonly Access[]): Promise<void> {
  for (const a of can) assert.equal(await allowed(sa, a), true, `${sa} must be able to ${describe(a)}`);
  for (const a of cannot) assert.equal(await allowed(sa, a), false, `${sa} must NOT be able to ${describe(a)}`);
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'number') return code;
    throw err;
  }
}

const skip = kubectlMissing();

before(async () => {
  if (skip) return;
  cluster = await startCluster({ simulateKubelet: false });
  await cluster.apply(await identityObjects());
  for (const sa of ['certbroker-ca', 'ztunnel', 'istio-cni']) {
    clients.set(sa, clientsFor(kubeConfigFor(cluster, await serviceAccountToken(cluster, { namespace: NS, serviceAccountName: sa }))));
  }
  await createPod(cluster, { namespace: 'app', name: 'web', serviceAccountName: 'web', nodeName: 'node-a' });
  await adminClient(cluster).core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'cacerts' }, stringData: { 'ca-key.pem': 'x' } } });
  await adminClient(cluster).core.createNamespacedSecret({ namespace: 'app', body: { metadata: { name: 'db-password' }, stringData: { p: 'x' } } });
});

after(() => cluster?.close());

test('deploy/ renders with kubectl kustomize and holds every part', { skip }, async () => {
  const objs = await renderDeploy();
  const kinds = (k: string) => objs.filter((o) => o.kind === k).map((o) => o.metadata.name).sort();
  assert.deepStrictEqual(kinds('ServiceAccount'), ['certbroker-ca', 'istio-cni', 'ztunnel']);
  assert.deepStrictEqual(kinds('DaemonSet'), ['certbroker-node-broker', 'istio-cni-node']);
  assert.deepStrictEqual(kinds('Deployment'), ['certbroker-ca']);
  assert.deepStrictEqual(kinds('Service'), ['certbroker-ca', 'certbroker-ca-headless', 'certbroker-istio-ca-front']);
  assert.deepStrictEqual(kinds('PodDisruptionBudget'), ['certbroker-ca']);
  assert.deepStrictEqual(kinds('FlowSchema'), ['certbroker-node-agents']);
  assert.deepStrictEqual(kinds('PriorityLevelConfiguration'), ['certbroker-node-agents']);
  for (const o of objs) {
    if (o.kind !== 'Namespace' && !o.kind.startsWith('Cluster') && o.kind !== 'FlowSchema' && o.kind !== 'PriorityLevelConfiguration') {
      assert.equal(o.metadata.namespace, NS, `${o.kind} ${o.metadata.name} is namespaced in ${NS}`);
    }
  }
});

test('the API server accepts every rendered object (workloads, PDB, FlowSchema, PLC)', { skip }, async () => {
  await cluster.apply(await renderDeploy());
  const ds = await adminClient(cluster).apps.readNamespacedDaemonSet({ namespace: NS, name: 'istio-cni-node' });
  assert.equal(ds.spec?.template.spec?.serviceAccountName, 'istio-cni');
});

test('the node broker\'s RBAC in deploy/ is exactly what the broker code declares for the projected-token mode', { skip }, async () => {
  // deploy/ runs the broker with BROKER_TOKEN_SOURCE=file: no serviceaccounts/token Role at all.
  const declared = brokerRbacObjects({ namespace: NS, serviceAccount: 'ztunnel', tokenRequest: false }) as K8sObject[];
  const ztunnelBound = (o: K8sObject) =>
    ((o as { subjects?: Array<{ kind: string; name: string; namespace?: string }> }).subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === 'ztunnel' && s.namespace === NS);
  const objs = await renderDeploy();
  const bindings = objs.filter((o) => (o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding') && ztunnelBound(o));
  const roles = bindings.map((b) => {
    const ref = (b as unknown as { roleRef: { kind: string; name: string } }).roleRef;
    return objs.find((o) => o.kind === ref.kind && o.metadata.name === ref.name && (ref.kind === 'ClusterRole' || o.metadata.namespace === b.metadata.namespace));
  });
  const shape = (o: K8sObject | undefined) => ({ kind: o?.kind, name: o?.metadata.name, rules: (o as { rules?: unknown } | undefined)?.rules, roleRef: (o as { roleRef?: unknown } | undefined)?.roleRef });
  const sort = (xs: Array<ReturnType<typeof shape>>) => xs.sort((a, b) => `${a.kind}/${a.name}`.localeCompare(`${b.kind}/${b.name}`));
  assert.deepStrictEqual(sort([...bindings, ...roles].map(shape)), sort(declared.map(shape)));
  assert.ok(!objs.some((o) => o.metadata.name === 'certbroker-node-broker-token'), 'the token Role/RoleBinding are gone from deploy/');
});

test('the broker DaemonSet authenticates to the CA with a kubelet-projected istio-ca token', { skip }, async () => {
  const ds = (await findObject('DaemonSet', 'certbroker-node-broker')) as unknown as {
    spec: { template: { spec: { containers: Array<{ name: string; env?: Array<{ name: string; value?: string }>; volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }> }>; volumes: Array<{ name: string; projected?: { sources: Array<{ serviceAccountToken?: { audience?: string; expirationSeconds?: number; path: string } }> } }> } } };
  };
  const pod = ds.spec.template.spec;
  const broker = pod.containers.find((c) => c.name === 'broker')!;
  const env = new Map((broker.env ?? []).map((e) => [e.name, e.value]));
  assert.equal(env.get('BROKER_TOKEN_SOURCE'), 'file');
  const tokenFile = env.get('BROKER_TOKEN_FILE');
  assert.ok(tokenFile, 'BROKER_TOKEN_FILE is set');
  const mount = (broker.volumeMounts ?? []).find((m) => tokenFile.startsWith(`${m.mountPath.replace(/\/$/, '')}/`));
  assert.ok(mount, `a volume is mounted where ${tokenFile} lives`);
  assert.equal(mount.readOnly, true);
  const volume = pod.volumes.find((v) => v.name === mount.name);
  const projected = volume?.projected?.sources.find((s) => s.serviceAccountToken)?.serviceAccountToken;
  assert.ok(projected, `${mount.name} is a projected serviceAccountToken volume`);
  assert.equal(projected.audience, env.get('CA_TOKEN_AUDIENCE') ?? 'istio-ca');
  assert.equal(projected.audience, 'istio-ca');
  assert.equal(projected.expirationSeconds, 3600);
  assert.equal(`${mount.mountPath.replace(/\/$/, '')}/${projected.path}`, tokenFile);
});

test('CA: TokenReview and pod reads; its own CA secret only; nothing else', { skip }, async () => {
  await checkMatrix(
    'certbroker-ca',
    [
      { verb: 'create', group: 'authentication.k8s.io', resource: 'tokenreviews' },
      { verb: 'list', resource: 'pods' },
      { verb: 'watch', resource: 'pods' },
      { verb: 'get', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'get', resource: 'secrets', namespace: NS, name: 'istio-ca-secret' },
      { verb: 'create', resource: 'secrets', namespace: NS },
    ],
    [
      { verb: 'get', resource: 'secrets', namespace: NS, name: 'cacerts' },
      { verb: 'list', resource: 'secrets', namespace: NS },
      { verb: 'watch', resource: 'secrets', namespace: NS },
      { verb: 'update', resource: 'secrets', namespace: NS, name: 'cacerts' },
      { verb: 'delete', resource: 'secrets', namespace: NS, name: 'istio-ca-secret' },
      { verb: 'get', resource: 'secrets', namespace: 'app', name: 'db-password' },
      { verb: 'create', resource: 'secrets', namespace: 'app' },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS, name: 'ztunnel' },
      { verb: 'delete', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'patch', resource: 'pods', subresource: 'status', namespace: 'app', name: 'web' },
      { verb: 'create', resource: 'pods', namespace: 'app' },
      { verb: 'get', resource: 'nodes', name: 'node-a' },
      { verb: 'create', group: 'rbac.authorization.k8s.io', resource: 'clusterrolebindings' },
    ],
  );
  const ca = as('certbroker-ca');
  assert.equal(await status(ca.core.readNamespacedSecret({ namespace: NS, name: 'istio-ca-secret' })), 404, 'allowed, just absent');
  assert.equal(await status(ca.core.readNamespacedSecret({ namespace: NS, name: 'cacerts' })), 403);
  assert.equal(await status(ca.core.listNamespacedSecret({ namespace: NS })), 403);
  assert.equal(await status(ca.core.listPodForAllNamespaces()), 200);
  const review = await ca.authn.createTokenReview({ body: { spec: { token: 'not-a-token' } } });
  assert.ok(review.status !== undefined, 'TokenReview is allowed and answers');
  assert.notEqual(review.status.authenticated, true);
});

test('CA trust-bundle publisher: its ConfigMap in every namespace, its ClusterTrustBundle with attest, its Lease; nothing wider', { skip }, async () => {
  const cm = 'istio-ca-root-cert';
  const ctb = 'istio.io:istiod-ca:root-cert';
  const certs = 'certificates.k8s.io';
  await checkMatrix(
    'certbroker-ca',
    [
      { verb: 'list', resource: 'namespaces' },
      { verb: 'watch', resource: 'namespaces' },
      { verb: 'list', resource: 'configmaps', name: cm },
      { verb: 'watch', resource: 'configmaps', name: cm },
      { verb: 'get', resource: 'configmaps', namespace: 'app', name: cm },
      { verb: 'update', resource: 'configmaps', namespace: 'app', name: cm },
      { verb: 'create', resource: 'configmaps', namespace: 'app' },
      { verb: 'watch', group: certs, resource: 'clustertrustbundles', name: ctb },
      { verb: 'update', group: certs, resource: 'clustertrustbundles', name: ctb },
      { verb: 'create', group: certs, resource: 'clustertrustbundles' },
      // Old bundles after a signer-name change: listed by label (cluster-wide), deleted by precondition.
      { verb: 'list', group: certs, resource: 'clustertrustbundles' },
      { verb: 'watch', group: certs, resource: 'clustertrustbundles' },
      { verb: 'delete', group: certs, resource: 'clustertrustbundles', name: 'example.com:old-ca:root-cert' },
      { verb: 'attest', group: certs, resource: 'signers', name: 'istio.io/istiod-ca' },
      { verb: 'get', group: 'coordination.k8s.io', resource: 'leases', namespace: NS, name: 'certbroker-ca-publisher' },
      { verb: 'update', group: 'coordination.k8s.io', resource: 'leases', namespace: NS, name: 'certbroker-ca-publisher' },
      { verb: 'create', group: 'coordination.k8s.io', resource: 'leases', namespace: NS },
    ],
    [
      { verb: 'list', resource: 'configmaps' },
      { verb: 'watch', resource: 'configmaps' },
      { verb: 'get', resource: 'configmaps', namespace: 'app', name: 'app-settings' },
      { verb: 'update', resource: 'configmaps', namespace: 'kube-system', name: 'kube-root-ca.crt' },
      { verb: 'delete', resource: 'configmaps', namespace: 'app', name: cm },
      { verb: 'patch', resource: 'namespaces', name: 'app' },
      { verb: 'update', group: certs, resource: 'clustertrustbundles', name: 'kubernetes.io:kube-apiserver-serving:x' },
      { verb: 'patch', group: certs, resource: 'clustertrustbundles', name: ctb },
      { verb: 'attest', group: certs, resource: 'signers', name: 'kubernetes.io/kube-apiserver-client' },
      { verb: 'attest', group: certs, resource: 'signers', name: 'istio.io/*' },
      { verb: 'update', group: 'coordination.k8s.io', resource: 'leases', namespace: NS, name: 'other-controller' },
      { verb: 'get', group: 'coordination.k8s.io', resource: 'leases', namespace: 'kube-system', name: 'certbroker-ca-publisher' },
      { verb: 'create', group: 'coordination.k8s.io', resource: 'leases', namespace: 'app' },
    ],
  );
  const ca = as('certbroker-ca');
  // The informers' requests themselves: a list/watch with a metadata.name field selector is
  // authorized against resourceNames (kube-apiserver's RequestInfo sets the name); without it, refused.
  assert.equal(await status(ca.core.listConfigMapForAllNamespaces({ fieldSelector: `metadata.name=${cm}` })), 200);
  assert.equal(await status(ca.core.listConfigMapForAllNamespaces()), 403);
  assert.equal(await status(ca.core.listConfigMapForAllNamespaces({ fieldSelector: 'metadata.name=app-settings' })), 403);
});

test('node broker (ztunnel): pod reads and TokenReviews (the Istio CA front) only; no tokens at all (not even its own), no secrets', { skip }, async () => {
  await checkMatrix(
    'ztunnel',
    [
      { verb: 'get', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'list', resource: 'pods' },
      { verb: 'watch', resource: 'pods' },
      // The Istio CA front reviews its callers' tokens; a review mints nothing and reads no secret.
      { verb: 'create', group: 'authentication.k8s.io', resource: 'tokenreviews' },
    ],
    [
      // Its CA token is kubelet-projected: with this permission its credentials could mint a token
      // bound to another node's broker pod (RBAC cannot restrict boundObjectRef).
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS, name: 'ztunnel' },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS, name: 'istio-cni' },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS, name: 'certbroker-ca' },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: 'app', name: 'web' },
      { verb: 'get', resource: 'secrets', namespace: NS, name: 'istio-ca-secret' },
      { verb: 'get', resource: 'secrets', namespace: NS, name: 'cacerts' },
      { verb: 'list', resource: 'secrets' },
      { verb: 'delete', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'patch', resource: 'pods', subresource: 'status', namespace: 'app', name: 'web' },
      { verb: 'get', resource: 'serviceaccounts', namespace: NS, name: 'ztunnel' },
      { verb: 'get', group: 'apps', resource: 'daemonsets', namespace: NS, name: 'istio-cni-node' },
    ],
  );
  const broker = as('ztunnel');
  const request = (namespace: string, name: string) =>
    broker.core.createNamespacedServiceAccountToken({ namespace, name, body: { spec: { audiences: ['istio-ca'], expirationSeconds: 600 } } });
  assert.equal(await status(request(NS, 'ztunnel')), 403);
  // The cross-node attack of docs/security.md finding 1: a CA token bound to another node's broker pod.
  const other = await createPod(cluster, { namespace: NS, name: 'certbroker-node-broker-other', serviceAccountName: 'ztunnel', nodeName: 'node-b' });
  const bound = broker.core.createNamespacedServiceAccountToken({
    namespace: NS,
    name: 'ztunnel',
    body: { spec: { audiences: ['istio-ca'], expirationSeconds: 600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: other.metadata!.name!, uid: other.metadata!.uid! } } },
  });
  assert.equal(await status(bound), 403);
  assert.equal(await status(request(NS, 'istio-cni')), 403);
  assert.equal(await status(request('app', 'web')), 403);
  assert.equal(await status(broker.core.readNamespacedSecret({ namespace: NS, name: 'cacerts' })), 403);
  assert.equal(await status(broker.core.listSecretForAllNamespaces()), 403);
  assert.equal(await status(broker.core.listPodForAllNamespaces({ fieldSelector: 'spec.nodeName=node-a' })), 200);
});

test('istio-cni: pod/namespace reads, repair actions, its own DaemonSet; no secrets, no tokens', { skip }, async () => {
  await checkMatrix(
    'istio-cni',
    [
      { verb: 'get', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'list', resource: 'pods' },
      { verb: 'watch', resource: 'pods' },
      { verb: 'get', resource: 'namespaces', name: 'app' },
      { verb: 'delete', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'patch', resource: 'pods', subresource: 'status', namespace: 'app', name: 'web' },
      { verb: 'create', resource: 'events', namespace: 'app' },
      { verb: 'get', group: 'apps', resource: 'daemonsets', namespace: NS, name: 'istio-cni-node' },
      { verb: 'get', resource: 'nodes', name: 'node-a' },
    ],
    [
      { verb: 'get', resource: 'secrets', namespace: NS, name: 'istio-ca-secret' },
      { verb: 'get', resource: 'secrets', namespace: NS, name: 'cacerts' },
      { verb: 'list', resource: 'secrets' },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS, name: 'istio-cni' },
      { verb: 'create', resource: 'serviceaccounts', subresource: 'token', namespace: NS, name: 'ztunnel' },
      { verb: 'patch', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'update', resource: 'pods', namespace: 'app', name: 'web' },
      { verb: 'create', resource: 'pods', namespace: 'app' },
      { verb: 'get', group: 'apps', resource: 'daemonsets', namespace: NS, name: 'certbroker-node-broker' },
      { verb: 'list', group: 'apps', resource: 'daemonsets', namespace: NS },
      { verb: 'update', group: 'apps', resource: 'daemonsets', namespace: NS, name: 'istio-cni-node' },
      { verb: 'list', resource: 'nodes' },
      { verb: 'patch', resource: 'nodes', name: 'node-a' },
      { verb: 'create', group: 'authentication.k8s.io', resource: 'tokenreviews' },
      { verb: 'delete', resource: 'events', namespace: 'app' },
    ],
  );
  const cni = as('istio-cni');
  assert.equal(await status(cni.core.readNamespacedSecret({ namespace: NS, name: 'cacerts' })), 403);
  assert.equal(
    await status(cni.core.createNamespacedServiceAccountToken({ namespace: NS, name: 'istio-cni', body: { spec: { audiences: ['istio-ca'] } } })),
    403,
  );
  assert.equal(await status(cni.apps.readNamespacedDaemonSet({ namespace: NS, name: 'istio-cni-node' })), 200);
  assert.equal(await status(cni.apps.readNamespacedDaemonSet({ namespace: NS, name: 'certbroker-node-broker' })), 403);
  assert.equal(await status(cni.core.readNamespace({ name: 'app' })), 200);
});

test('no account can escalate through RBAC objects or impersonation', { skip }, async () => {
  for (const sa of ['certbroker-ca', 'ztunnel', 'istio-cni']) {
    await checkMatrix(sa, [], [
      { verb: 'create', group: 'rbac.authorization.k8s.io', resource: 'rolebindings', namespace: NS },
      { verb: 'bind', group: 'rbac.authorization.k8s.io', resource: 'clusterroles', name: 'cluster-admin' },
      { verb: 'escalate', group: 'rbac.authorization.k8s.io', resource: 'roles', namespace: NS },
      { verb: 'impersonate', resource: 'serviceaccounts', namespace: NS },
      { verb: 'impersonate', resource: 'users' },
      { verb: '*', group: '*', resource: '*' },
    ]);
  }
});
