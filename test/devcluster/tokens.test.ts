/**
 * TokenRequest, TokenReview and the OIDC documents, through @kubernetes/client-node and jose.
 * Token lifetimes run on a FakeClock: expiry is tested by moving time, not by waiting.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createLocalJWKSet, jwtVerify, decodeJwt } from 'jose';
import { FakeClock } from '../support/fake-clock.js';
import { startCluster, adminClient, createPod, deletePod, rawRequest, serviceAccountToken, kubeConfigFor, clientsFor, type DevCluster } from '../support/cluster.js';

const clock = new FakeClock(Date.UTC(2026, 5, 1));
let cluster: DevCluster;
before(async () => {
  cluster = await startCluster({ clock, maxTokenSeconds: 86_400 });
  await createPod(cluster, { namespace: 'tok', name: 'agent', serviceAccountName: 'agent', nodeName: 'node-t' });
  await createPod(cluster, { namespace: 'tok', name: 'other', serviceAccountName: 'other', nodeName: 'node-t' });
});
after(() => cluster.close());

async function review(token: string, audiences?: string[]) {
  const r = await adminClient(cluster).authn.createTokenReview({ body: { spec: { token, ...(audiences ? { audiences } : {}) } } });
  return r.status ?? {};
}

function code(err: unknown): number | undefined {
  return (err as { code?: number }).code;
}

function statusOf(err: unknown): { reason?: string; message?: string } {
  return JSON.parse((err as { body?: string }).body ?? '{}') as { reason?: string; message?: string };
}

test('TokenRequest issues the real claim set, bound to pod and node', async () => {
  const { core } = adminClient(cluster);
  const pod = await core.readNamespacedPod({ namespace: 'tok', name: 'agent' });
  const node = await core.readNode({ name: 'node-t' });
  const sa = await core.readNamespacedServiceAccount({ namespace: 'tok', name: 'agent' });
  const res = await core.createNamespacedServiceAccountToken({
    namespace: 'tok',
    name: 'agent',
    body: { spec: { audiences: ['istio-ca'], expirationSeconds: 3600, boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'agent', uid: pod.metadata?.uid } } },
  });
  const token = res.status!.token;
  const c = decodeJwt(token) as Record<string, unknown>;
  const nowS = Math.floor(clock.now() / 1000);
  assert.equal(c.iss, cluster.issuer);
  assert.equal(c.sub, 'system:serviceaccount:tok:agent');
  assert.deepEqual(c.aud, ['istio-ca']);
  assert.equal(c.iat, nowS);
  assert.equal(c.nbf, nowS);
  assert.equal(c.exp, nowS + 3600);
  assert.match(String(c.jti), /^[0-9a-f-]{36}$/);
  assert.deepEqual(c['kubernetes.io'], {
    namespace: 'tok',
    node: { name: 'node-t', uid: node.metadata?.uid },
    pod: { name: 'agent', uid: pod.metadata?.uid },
    serviceaccount: { name: 'agent', uid: sa.metadata?.uid },
  });
  assert.equal(new Date(res.status!.expirationTimestamp).getTime(), (nowS + 3600) * 1000);

  const status = await review(token, ['istio-ca']);
  assert.equal(status.authenticated, true);
  assert.deepEqual(status.user?.extra?.['authentication.kubernetes.io/node-name'], ['node-t']);
  assert.deepEqual(status.user?.extra?.['authentication.kubernetes.io/node-uid'], [node.metadata?.uid]);
  assert.deepEqual(status.user?.extra?.['authentication.kubernetes.io/credential-id'], [`JTI=${c.jti}`]);
  assert.equal(status.user?.uid, sa.metadata?.uid);
});

test('TokenRequest rules: minimum lifetime, clamp to maximum, bound pod must exist, match UID and run as the SA', async () => {
  const { core } = adminClient(cluster);
  const ask = (name: string, spec: Record<string, unknown>) => core.createNamespacedServiceAccountToken({ namespace: 'tok', name, body: { spec } as never });
  await assert.rejects(ask('agent', { audiences: ['a'], expirationSeconds: 599 }), (e) => code(e) === 422 && /may not specify a duration less than 10 minutes/.test(statusOf(e).message ?? ''));
  const long = await ask('agent', { audiences: ['a'], expirationSeconds: 10 * 86_400 });
  assert.equal(long.spec.expirationSeconds, 86_400);
  await assert.rejects(ask('agent', { boundObjectRef: { kind: 'Pod', name: 'nope' } }), (e) => code(e) === 404 && statusOf(e).message === 'pods "nope" not found');
  await assert.rejects(ask('agent', { boundObjectRef: { kind: 'Pod', name: 'other' } }), (e) => code(e) === 400 && /different serviceaccount/.test(statusOf(e).message ?? ''));
  await assert.rejects(ask('agent', { boundObjectRef: { kind: 'Pod', name: 'agent', uid: 'f00' } }), (e) => code(e) === 409);
  await assert.rejects(ask('ghost', {}), (e) => code(e) === 404 && statusOf(e).message === 'serviceaccounts "ghost" not found');
  await assert.rejects(ask('agent', { boundObjectRef: { kind: 'ConfigMap', name: 'x' } }), (e) => code(e) === 400);
});

test('tokens verify against the published JWKS; OIDC discovery names the issuer', async () => {
  // system:service-account-issuer-discovery is bound to all service accounts, as in a real cluster.
  const apiToken = await serviceAccountToken(cluster, { namespace: 'tok', serviceAccountName: 'agent' });
  const fetchJson = async (path: string) => {
    const r = await rawRequest(cluster, 'GET', path, { token: apiToken });
    assert.equal(r.code, 200, path);
    return JSON.parse(r.text) as Record<string, unknown>;
  };
  const discovery = await fetchJson('/.well-known/openid-configuration');
  assert.equal(discovery.issuer, cluster.issuer);
  assert.equal(discovery.jwks_uri, `${cluster.url}/openid/v1/jwks`);
  assert.deepEqual(discovery.id_token_signing_alg_values_supported, ['ES256']);
  const jwks = (await fetchJson('/openid/v1/jwks')) as { keys: Array<Record<string, unknown>> };
  const token = await serviceAccountToken(cluster, { namespace: 'tok', serviceAccountName: 'agent', audiences: ['istio-ca'], podName: 'agent' });
  const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(jwks as never), { issuer: cluster.issuer, audience: 'istio-ca', currentDate: new Date(clock.now()) });
  assert.equal(payload.sub, 'system:serviceaccount:tok:agent');
  assert.equal(protectedHeader.alg, 'ES256');
  assert.equal(protectedHeader.kid, jwks.keys[0]!.kid);
});

test('TokenReview rejects: wrong audience, expired, deleted SA, pod recreated under the same name', async () => {
  const token = await serviceAccountToken(cluster, { namespace: 'tok', serviceAccountName: 'agent', audiences: ['istio-ca'], podName: 'agent', expirationSeconds: 600 });
  assert.equal((await review(token, ['istio-ca'])).authenticated, true);
  assert.notEqual((await review(token, ['kubernetes'])).authenticated, true);
  assert.notEqual((await review(token)).authenticated, true, 'default audience is the API server, not istio-ca');
  const multi = await review(token, ['x', 'istio-ca']);
  assert.deepEqual(multi.audiences, ['istio-ca']);

  const t0 = clock.now();
  clock.set(t0 + 599_000);
  assert.equal((await review(token, ['istio-ca'])).authenticated, true);
  clock.set(t0 + 601_000);
  const expired = await review(token, ['istio-ca']);
  assert.notEqual(expired.authenticated, true);
  assert.match(expired.error ?? '', /expired/);
  clock.set(t0);

  // The pod is deleted and a new one with the same name appears: the old token stays dead.
  await createPod(cluster, { namespace: 'tok', name: 'phoenix', serviceAccountName: 'agent', nodeName: 'node-t' });
  const bound = await serviceAccountToken(cluster, { namespace: 'tok', serviceAccountName: 'agent', audiences: ['istio-ca'], podName: 'phoenix' });
  assert.equal((await review(bound, ['istio-ca'])).authenticated, true);
  await deletePod(cluster, { namespace: 'tok', name: 'phoenix', gracePeriodSeconds: 0 });
  await createPod(cluster, { namespace: 'tok', name: 'phoenix', serviceAccountName: 'agent', nodeName: 'node-t' });
  assert.notEqual((await review(bound, ['istio-ca'])).authenticated, true);

  // Deleting the service account invalidates every token it had.
  await createPod(cluster, { namespace: 'tok', name: 'short', serviceAccountName: 'shortlived', nodeName: 'node-t' });
  const apiToken = await serviceAccountToken(cluster, { namespace: 'tok', serviceAccountName: 'shortlived' });
  const saClient = clientsFor(kubeConfigFor(cluster, apiToken));
  const ssr = await saClient.authn.createSelfSubjectReview({ body: {} });
  assert.equal(ssr.status?.userInfo?.username, 'system:serviceaccount:tok:shortlived');
  await adminClient(cluster).core.deleteNamespacedServiceAccount({ namespace: 'tok', name: 'shortlived' });
  await assert.rejects(saClient.authn.createSelfSubjectReview({ body: {} }), (e) => code(e) === 401);
  assert.notEqual((await review(apiToken)).authenticated, true);
});

test('TokenReview and SubjectAccessReview need RBAC (system:auth-delegator) for service-account callers', async () => {
  await createPod(cluster, { namespace: 'tok', name: 'ca-0', serviceAccountName: 'ca', nodeName: 'node-t' });
  const caToken = await serviceAccountToken(cluster, { namespace: 'tok', serviceAccountName: 'ca' });
  const ca = clientsFor(kubeConfigFor(cluster, caToken));
  const subject = await serviceAccountToken(cluster, { namespace: 'tok', serviceAccountName: 'agent', audiences: ['istio-ca'], podName: 'agent' });
  await assert.rejects(ca.authn.createTokenReview({ body: { spec: { token: subject, audiences: ['istio-ca'] } } }), (e) => {
    assert.equal(code(e), 403);
    assert.equal(statusOf(e).message, 'tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:tok:ca" cannot create resource "tokenreviews" in API group "authentication.k8s.io" at the cluster scope');
    return true;
  });
  await adminClient(cluster).rbac.createClusterRoleBinding({
    body: { metadata: { name: 'ca-auth-delegator' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' }, subjects: [{ kind: 'ServiceAccount', name: 'ca', namespace: 'tok' }] },
  });
  const r = await ca.authn.createTokenReview({ body: { spec: { token: subject, audiences: ['istio-ca'] } } });
  assert.equal(r.status?.authenticated, true);
  const sar = await ca.authz.createSubjectAccessReview({
    body: { spec: { user: 'system:serviceaccount:tok:agent', groups: ['system:serviceaccounts'], resourceAttributes: { verb: 'create', group: 'authentication.k8s.io', resource: 'tokenreviews' } } },
  });
  assert.equal(sar.status?.allowed, false);
  const sar2 = await ca.authz.createSubjectAccessReview({
    body: { spec: { user: 'system:serviceaccount:tok:ca', resourceAttributes: { verb: 'create', group: 'authentication.k8s.io', resource: 'tokenreviews' } } },
  });
  assert.equal(sar2.status?.allowed, true);
  assert.equal(sar2.status?.reason, 'RBAC: allowed by ClusterRoleBinding "ca-auth-delegator" of ClusterRole "system:auth-delegator" to ServiceAccount "ca/tok"');
});
