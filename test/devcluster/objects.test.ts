/**
 * Kinds beyond pods: the deploy/ manifests load as they are (RBAC, DaemonSets, Deployment,
 * FlowSchema, PriorityLevelConfiguration, PodDisruptionBudget), CertificateSigningRequests go
 * through /approval and /status, and the generic REST verbs behave (generateName, dryRun,
 * pagination, patches, namespace cascade).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { setHeaderOptions, PatchStrategy } from '@kubernetes/client-node';
import { parseManifest } from '../../src/devcluster/index.js';
import { createCsr, createRootCa, generateKeyPair } from '../../src/pki/index.js';
import { startCluster, adminClient, kubectl, clientsFor, kubeConfigFor, createServiceAccount, serviceAccountToken, type DevCluster } from '../support/cluster.js';
import { kubectlMissing } from '../support/tools.js';

let cluster: DevCluster;
before(async () => {
  cluster = await startCluster();
});
after(() => cluster.close());

test('the deploy/ manifests load in kustomization order and are served back', { skip: kubectlMissing() }, async () => {
  const root = join(process.cwd(), 'deploy');
  const kustomization = parse(readFileSync(join(root, 'kustomization.yaml'), 'utf8')) as { resources?: string[] };
  const files = (kustomization.resources ?? []).filter((f) => f.endsWith('.yaml'));
  assert.ok(files.length > 0, 'kustomization lists resources');
  for (const f of files) await cluster.apply(parseManifest(readFileSync(join(root, f), 'utf8')) as object[]);
  // Applying twice is create-or-replace, not an error.
  for (const f of files) await cluster.apply(parseManifest(readFileSync(join(root, f), 'utf8')) as object[]);
  const out = await kubectl(cluster, ['get', 'daemonsets,clusterroles,flowschemas,prioritylevelconfigurations,poddisruptionbudgets', '-A', '-o', 'name']);
  assert.equal(out.code, 0, out.stderr);
  const { apps } = adminClient(cluster);
  const ds = await apps.listDaemonSetForAllNamespaces();
  assert.ok(ds.items.length >= 1);
  const one = ds.items[0]!;
  const again = await apps.readNamespacedDaemonSet({ namespace: one.metadata!.namespace!, name: one.metadata!.name! });
  assert.equal(again.metadata?.uid, one.metadata?.uid);
  assert.match(out.stdout, /flowschema/);
});

/** A real PEM CSR (the API server parses spec.request), base64 as the API carries it. */
async function csrB64(): Promise<string> {
  const { privateKey } = await generateKeyPair();
  return Buffer.from(createCsr({ privateKey, uri: 'spiffe://cluster.local/ns/default/sa/sleep' }).pem).toString('base64');
}

let cert: Promise<string> | undefined;
/** PEM certificate blocks for status.certificate (one per process). */
function certB64(): Promise<string> {
  cert ??= createRootCa({ subject: 'CN=objects-test', ttlSeconds: 3600 }).then((c) => Buffer.from(c.pem).toString('base64'));
  return cert;
}

test('CertificateSigningRequests: create records the requester, /approval adds conditions, /status takes the certificate', async () => {
  const { certs } = adminClient(cluster);
  const csr = await certs.createCertificateSigningRequest({
    body: { metadata: { name: 'node-csr' }, spec: { request: await csrB64(), signerName: 'example.com/signer', usages: ['client auth'] } },
  });
  assert.equal(csr.spec.username, 'devcluster-admin');
  assert.equal(csr.status?.conditions, undefined);
  const approved = await certs.replaceCertificateSigningRequestApproval({
    name: 'node-csr',
    body: { ...csr, status: { conditions: [{ type: 'Approved', status: 'True', reason: 'Test', message: 'ok' }] } },
  });
  assert.equal(approved.status?.conditions?.[0]?.type, 'Approved');
  const issued = await certs.replaceCertificateSigningRequestStatus({
    name: 'node-csr',
    body: { ...approved, status: { ...approved.status, certificate: await certB64() } },
  });
  assert.equal(issued.status?.certificate, await certB64());
  assert.equal(issued.status?.conditions?.[0]?.type, 'Approved');
  const bySigner = await certs.listCertificateSigningRequest({ fieldSelector: 'spec.signerName=example.com/signer' });
  assert.equal(bySigner.items.length, 1);
  await assert.rejects(certs.createCertificateSigningRequest({ body: { metadata: { name: 'bad' }, spec: { request: '', signerName: '' } } }), (e: { code?: number }) => e.code === 422);
});

test('REST verbs: generateName, dryRun, pagination, strategic merge of conditions, JSON patch, status split', async () => {
  const { core } = adminClient(cluster);
  await core.createNamespace({ body: { metadata: { name: 'rest' } } });
  const gen = await core.createNamespacedConfigMap({ namespace: 'rest', body: { metadata: { generateName: 'cfg-' } } });
  assert.match(gen.metadata!.name!, /^cfg-[a-z0-9]{5}$/);
  const dry = await core.createNamespacedConfigMap({ namespace: 'rest', dryRun: 'All', body: { metadata: { name: 'dry' } } });
  assert.equal(dry.metadata?.name, 'dry');
  await assert.rejects(core.readNamespacedConfigMap({ namespace: 'rest', name: 'dry' }), (e: { code?: number }) => e.code === 404);

  for (let i = 0; i < 5; i++) await core.createNamespacedSecret({ namespace: 'rest', body: { metadata: { name: `s${i}` }, stringData: { k: `v${i}` } } });
  const page1 = await core.listNamespacedSecret({ namespace: 'rest', limit: 2 });
  assert.deepEqual(page1.items.map((s) => s.metadata?.name), ['s0', 's1']);
  assert.equal(page1.metadata?.remainingItemCount, 3);
  const page2 = await core.listNamespacedSecret({ namespace: 'rest', limit: 2, _continue: page1.metadata!._continue! });
  assert.deepEqual(page2.items.map((s) => s.metadata?.name), ['s2', 's3']);
  const page3 = await core.listNamespacedSecret({ namespace: 'rest', limit: 2, _continue: page2.metadata!._continue! });
  assert.deepEqual(page3.items.map((s) => s.metadata?.name), ['s4']);
  assert.equal(page3.metadata?._continue, undefined);
  assert.equal(Buffer.from(page1.items[0]!.data!.k!, 'base64').toString(), 'v0');

  const pod = await core.createNamespacedPod({ namespace: 'rest', body: { metadata: { name: 'p' }, spec: { containers: [{ name: 'c', image: 'i' }] } } });
  assert.equal(pod.status?.phase, 'Pending');
  // Status from a main-resource update is ignored; the status subresource takes it.
  const ignored = await core.replaceNamespacedPod({ namespace: 'rest', name: 'p', body: { ...pod, status: { phase: 'Failed' } } });
  assert.equal(ignored.status?.phase, 'Pending');
  const smp = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
  await core.patchNamespacedPodStatus({ namespace: 'rest', name: 'p', body: { status: { conditions: [{ type: 'Ready', status: 'False' }, { type: 'PodScheduled', status: 'True' }] } } }, smp);
  const merged = await core.patchNamespacedPodStatus({ namespace: 'rest', name: 'p', body: { status: { conditions: [{ type: 'Ready', status: 'True' }] } } }, smp);
  assert.deepEqual(merged.status?.conditions?.map((c) => `${c.type}=${c.status}`), ['Ready=True', 'PodScheduled=True']);
  const jp = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
  const labelled = await core.patchNamespacedPod({ namespace: 'rest', name: 'p', body: [{ op: 'add', path: '/metadata/labels', value: { 'a/b': 'c' } }] }, jp);
  assert.deepEqual(labelled.metadata?.labels, { 'a/b': 'c' });
  await assert.rejects(
    core.patchNamespacedPod({ namespace: 'rest', name: 'p', body: [{ op: 'replace', path: '/spec/serviceAccountName', value: 'x' }] }, jp),
    (e: { code?: number }) => e.code === 422,
  );
});

test('deleting a namespace removes everything in it', async () => {
  const { core } = adminClient(cluster);
  await core.createNamespace({ body: { metadata: { name: 'doomed' } } });
  await core.createNamespacedConfigMap({ namespace: 'doomed', body: { metadata: { name: 'c' } } });
  const sas = await core.listNamespacedServiceAccount({ namespace: 'doomed' });
  assert.deepEqual(sas.items.map((s) => s.metadata?.name), ['default']);
  const root = await core.readNamespacedConfigMap({ namespace: 'doomed', name: 'kube-root-ca.crt' });
  assert.equal(root.data?.['ca.crt'], cluster.caCertPem);
  const answer = await core.deleteNamespace({ name: 'doomed' });
  assert.equal((answer as { status?: { phase?: string } }).status?.phase, 'Terminating');
  await assert.rejects(core.readNamespace({ name: 'doomed' }), (e: { code?: number }) => e.code === 404);
  const left = await core.listConfigMapForAllNamespaces({ fieldSelector: 'metadata.namespace=doomed' });
  assert.equal(left.items.length, 0);
});

test('pods/status writes may change labels and annotations but never the spec (as the real status strategy)', async () => {
  const { core } = adminClient(cluster);
  await core.createNamespace({ body: { metadata: { name: 'status-meta' } } });
  await core.createNamespacedPod({ namespace: 'status-meta', body: { metadata: { name: 'p', labels: { a: '1' } }, spec: { containers: [{ name: 'c', image: 'i' }] } } });
  const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  const out = await core.patchNamespacedPodStatus(
    { namespace: 'status-meta', name: 'p', body: { metadata: { labels: { 'cni.istio.io/uninitialized': 'true' } }, spec: { nodeName: 'sneaky' }, status: { phase: 'Failed' } } },
    merge,
  );
  assert.deepEqual(out.metadata?.labels, { a: '1', 'cni.istio.io/uninitialized': 'true' });
  assert.equal(out.spec?.nodeName, undefined, 'spec changes through /status are dropped');
  assert.equal(out.status?.phase, 'Failed');
  const read = await core.readNamespacedPod({ namespace: 'status-meta', name: 'p' });
  assert.equal(read.metadata?.labels?.['cni.istio.io/uninitialized'], 'true');
});

test('optional ServiceAccount admission rejects pods whose service account is missing', async () => {
  const strict = await startCluster({ requireServiceAccounts: true });
  try {
    const { core } = adminClient(strict);
    await core.createNamespace({ body: { metadata: { name: 'sa-adm' } } });
    const body = { metadata: { name: 'p' }, spec: { serviceAccountName: 'missing', containers: [{ name: 'c', image: 'i' }] } };
    await assert.rejects(core.createNamespacedPod({ namespace: 'sa-adm', body }), (e: { code?: number; body?: string }) => {
      assert.equal(e.code, 403);
      assert.match(JSON.parse(e.body ?? '{}').message, /error looking up service account sa-adm\/missing: serviceaccount "missing" not found/);
      return true;
    });
    const ok = await core.createNamespacedPod({ namespace: 'sa-adm', body: { ...body, spec: { ...body.spec, serviceAccountName: 'default' } } });
    assert.equal(ok.spec?.serviceAccountName, 'default');
  } finally {
    await strict.close();
  }
});

test('approving or signing a CSR needs approve/sign on its signer, besides the subresource', async () => {
  const { certs, rbac } = adminClient(cluster);
  await createServiceAccount(cluster, { namespace: 'csr-ns', name: 'approver' });
  const approver = clientsFor(kubeConfigFor(cluster, await serviceAccountToken(cluster, { namespace: 'csr-ns', serviceAccountName: 'approver' }))).certs;
  const csr = await certs.createCertificateSigningRequest({ body: { metadata: { name: 'to-approve' }, spec: { request: await csrB64(), signerName: 'example.com/mesh', usages: ['client auth'] } } });
  await rbac.createClusterRole({ body: { metadata: { name: 'csr-approval' }, rules: [{ apiGroups: ['certificates.k8s.io'], resources: ['certificatesigningrequests/approval'], verbs: ['update'] }] } });
  await rbac.createClusterRoleBinding({ body: { metadata: { name: 'csr-approval' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'csr-approval' }, subjects: [{ kind: 'ServiceAccount', name: 'approver', namespace: 'csr-ns' }] } });
  const approve = () => approver.replaceCertificateSigningRequestApproval({ name: 'to-approve', body: { ...csr, status: { conditions: [{ type: 'Approved', status: 'True', reason: 'R', message: 'm' }] } } });
  await assert.rejects(approve(), (e: { code?: number; body?: string }) => e.code === 403 && /user not permitted to approve requests with signerName "example.com\/mesh"/.test(JSON.parse(e.body ?? '{}').message));
  await rbac.createClusterRole({ body: { metadata: { name: 'mesh-signer-approver' }, rules: [{ apiGroups: ['certificates.k8s.io'], resources: ['signers'], verbs: ['approve'], resourceNames: ['example.com/*'] }] } });
  await rbac.createClusterRoleBinding({ body: { metadata: { name: 'mesh-signer-approver' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'mesh-signer-approver' }, subjects: [{ kind: 'ServiceAccount', name: 'approver', namespace: 'csr-ns' }] } });
  const approved = await approve();
  assert.equal(approved.status?.conditions?.[0]?.type, 'Approved');
});
