/**
 * `certificates.k8s.io/v1beta1` ClusterTrustBundle in the devcluster, as kube-apiserver admits
 * it: the signer-linked name rule, trust bundles of CA certificates only, signerName immutable,
 * the `attest` verb on `signers` for signer-linked bundles (exact name or `<domain>/*`), field
 * selection by signer, and `kubectl get clustertrustbundles`.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { webcrypto } from 'node:crypto';
import { createRootCa, x509, type CaCertificate } from '../../src/pki/index.js';
import { startCluster, rawRequest, createServiceAccount, serviceAccountToken, kubectl, type DevCluster } from '../support/cluster.js';
import { kubectlMissing } from '../support/tools.js';

const PATH = '/apis/certificates.k8s.io/v1beta1/clustertrustbundles';
const SIGNER = 'certbroker.io/mesh-ca';
let cluster: DevCluster;
let rootA: CaCertificate;
let rootB: CaCertificate;
let leafPem: string;

before(async () => {
  cluster = await startCluster();
  rootA = await createRootCa({ subject: 'CN=Root A', ttlSeconds: 86400 });
  rootB = await createRootCa({ subject: 'CN=Root B', ttlSeconds: 86400 });
  const keys = await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
  const leaf = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=not a CA',
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: [new x509.BasicConstraintsExtension(false, undefined, true)],
  });
  leafPem = leaf.toString('pem');
});
after(() => cluster.close());

interface Reply {
  readonly code: number;
  readonly json: Record<string, unknown>;
}

async function send(method: string, path: string, body: unknown, token?: string): Promise<Reply> {
  const r = await rawRequest(cluster, method, path, { body: JSON.stringify(body), contentType: 'application/json', ...(token ? { token } : {}) });
  return { code: r.code, json: JSON.parse(r.text) as Record<string, unknown> };
}

const ctb = (name: string, trustBundle: string, signerName?: string) => ({
  apiVersion: 'certificates.k8s.io/v1beta1',
  kind: 'ClusterTrustBundle',
  metadata: { name },
  spec: { ...(signerName ? { signerName } : {}), trustBundle },
});

function assertInvalid(r: Reply, message: RegExp): void {
  assert.equal(r.code, 422, JSON.stringify(r.json));
  assert.equal(r.json.reason, 'Invalid');
  assert.match(String(r.json.message), message);
}

test('a signer-linked bundle is named <signer with / as :>:<suffix> and holds CA certificates only', async () => {
  const created = await send('POST', PATH, ctb('certbroker.io:mesh-ca:roots', rootA.pem + rootB.pem, SIGNER));
  assert.equal(created.code, 201, JSON.stringify(created.json));
  assertInvalid(await send('POST', PATH, ctb('mesh-ca-roots', rootA.pem, SIGNER)), /metadata.name: Invalid value: "mesh-ca-roots": ClusterTrustBundle for signerName certbroker.io\/mesh-ca must be named with prefix certbroker.io:mesh-ca:/);
  assertInvalid(await send('POST', PATH, ctb('a:b', rootA.pem)), /ClusterTrustBundle without signer name must not have ":" in its name/);
  assertInvalid(await send('POST', PATH, ctb('certbroker.io:mesh-ca:leaf', leafPem, SIGNER)), /spec.trustBundle: Invalid value: "<value omitted>": entry 0 does not have the CA bit set/);
  assertInvalid(await send('POST', PATH, ctb('certbroker.io:mesh-ca:key', `${rootA.pem}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n`, SIGNER)), /entry 1 has bad block type: PRIVATE KEY/);
  assertInvalid(await send('POST', PATH, ctb('certbroker.io:mesh-ca:dup', rootA.pem + rootA.pem, SIGNER)), /duplicate trust anchor \(indices \[0 1\]\)/);
  assertInvalid(await send('POST', PATH, ctb('certbroker.io:mesh-ca:empty', 'no PEM here', SIGNER)), /at least one trust anchor must be provided/);
  assertInvalid(await send('POST', PATH, ctb('bad-signer:x', rootA.pem, 'bad-signer')), /spec.signerName: Invalid value: "bad-signer"/);
  const headers = rootA.pem.replace('-----BEGIN CERTIFICATE-----\n', '-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\n');
  assertInvalid(await send('POST', PATH, ctb('certbroker.io:mesh-ca:hdr', headers, SIGNER)), /entry 0 has PEM block headers/);

  const stored = created.json as { metadata: { resourceVersion: string } };
  const moved = await send('PUT', `${PATH}/certbroker.io:mesh-ca:roots`, { ...ctb('certbroker.io:mesh-ca:roots', rootA.pem, 'certbroker.io/other'), metadata: { name: 'certbroker.io:mesh-ca:roots', resourceVersion: stored.metadata.resourceVersion } });
  assertInvalid(moved, /spec.signerName: Invalid value: "certbroker.io\/other": field is immutable/);
  const rotated = await send('PUT', `${PATH}/certbroker.io:mesh-ca:roots`, { ...ctb('certbroker.io:mesh-ca:roots', rootB.pem, SIGNER), metadata: { name: 'certbroker.io:mesh-ca:roots', resourceVersion: stored.metadata.resourceVersion } });
  assert.equal(rotated.code, 200, JSON.stringify(rotated.json));

  const bySigner = await rawRequest(cluster, 'GET', `${PATH}?fieldSelector=${encodeURIComponent(`spec.signerName=${SIGNER}`)}`);
  const items = (JSON.parse(bySigner.text) as { items: Array<{ metadata: { name: string } }> }).items;
  assert.deepEqual(items.map((i) => i.metadata.name), ['certbroker.io:mesh-ca:roots']);
});

test('creating or updating a signer-linked bundle needs attest on signers/<name> (or <domain>/*); an unlinked one does not', async () => {
  await createServiceAccount(cluster, { namespace: 'pub', name: 'publisher' });
  await createServiceAccount(cluster, { namespace: 'pub', name: 'wildcard' });
  const write = { apiGroups: ['certificates.k8s.io'], resources: ['clustertrustbundles'], verbs: ['create', 'get', 'update'] };
  const rbacObjects = [
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'ctb-writer' }, rules: [write] },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'ctb-writer' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'ctb-writer' },
      subjects: [{ kind: 'ServiceAccount', namespace: 'pub', name: 'publisher' }, { kind: 'ServiceAccount', namespace: 'pub', name: 'wildcard' }] },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'ctb-attest-wild' }, rules: [{ apiGroups: ['certificates.k8s.io'], resources: ['signers'], resourceNames: ['certbroker.io/*'], verbs: ['attest'] }] },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'ctb-attest-wild' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'ctb-attest-wild' },
      subjects: [{ kind: 'ServiceAccount', namespace: 'pub', name: 'wildcard' }] },
  ];
  await cluster.apply(rbacObjects);
  const publisher = await serviceAccountToken(cluster, { namespace: 'pub', serviceAccountName: 'publisher' });
  const wildcard = await serviceAccountToken(cluster, { namespace: 'pub', serviceAccountName: 'wildcard' });

  const refused = await send('POST', PATH, ctb('certbroker.io:mesh-ca:attest', rootA.pem, SIGNER), publisher);
  assert.equal(refused.code, 403, JSON.stringify(refused.json));
  assert.equal(refused.json.message, 'clustertrustbundles.certificates.k8s.io "certbroker.io:mesh-ca:attest" is forbidden: user not permitted to attest for signerName "certbroker.io/mesh-ca"');
  const unlinked = await send('POST', PATH, ctb('plain-roots', rootA.pem), publisher);
  assert.equal(unlinked.code, 201, 'a bundle without signerName needs no attest');

  const created = await send('POST', PATH, ctb('certbroker.io:mesh-ca:attest', rootA.pem, SIGNER), wildcard);
  assert.equal(created.code, 201, JSON.stringify(created.json));
  const rv = (created.json as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const update = { ...ctb('certbroker.io:mesh-ca:attest', rootB.pem, SIGNER), metadata: { name: 'certbroker.io:mesh-ca:attest', resourceVersion: rv } };
  const updateRefused = await send('PUT', `${PATH}/certbroker.io:mesh-ca:attest`, update, publisher);
  assert.equal(updateRefused.code, 403, 'an update of a signer-linked bundle needs attest too');
  const gcOnly = { ...ctb('certbroker.io:mesh-ca:attest', rootA.pem, SIGNER), metadata: { name: 'certbroker.io:mesh-ca:attest', resourceVersion: rv, finalizers: ['example.com/keep'] } };
  assert.equal((await send('PUT', `${PATH}/certbroker.io:mesh-ca:attest`, gcOnly, publisher)).code, 200, 'an update of finalizers only needs no attest');

  await cluster.apply([
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'ctb-attest-exact' }, rules: [{ apiGroups: ['certificates.k8s.io'], resources: ['signers'], resourceNames: [SIGNER], verbs: ['attest'] }] },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'ctb-attest-exact' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'ctb-attest-exact' },
      subjects: [{ kind: 'ServiceAccount', namespace: 'pub', name: 'publisher' }] },
  ]);
  const current = await rawRequest(cluster, 'GET', `${PATH}/certbroker.io:mesh-ca:attest`);
  const rv2 = (JSON.parse(current.text) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  assert.equal((await send('PUT', `${PATH}/certbroker.io:mesh-ca:attest`, { ...update, metadata: { ...update.metadata, resourceVersion: rv2 } }, publisher)).code, 200);
});

test('kubectl get clustertrustbundles lists them with their signer', { skip: kubectlMissing() }, async () => {
  const r = await kubectl(cluster, ['get', 'clustertrustbundles']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^NAME\s+SIGNERNAME\n/);
  assert.match(r.stdout, /certbroker\.io:mesh-ca:roots\s+certbroker\.io\/mesh-ca\n/);
  assert.match(r.stdout, /plain-roots\s+<none>\n/);
  const one = await kubectl(cluster, ['get', 'clustertrustbundle', 'certbroker.io:mesh-ca:roots', '-o', 'jsonpath={.spec.trustBundle}']);
  assert.equal(one.code, 0, one.stderr);
  assert.equal(one.stdout, rootB.pem);
});
