/**
 * PodCertificateRequests (certificates.k8s.io/v1beta1) on the devcluster over HTTPS, as
 * kube-apiserver 1.35 admits them: created by the pod's node (NodeRestriction: node name, pod
 * binding, service account and UIDs), with a proof of possession for each key kind, the
 * maxExpirationSeconds default and range, an immutable spec, and `/status` writes only by a
 * caller allowed to `sign` for the signer, under the condition and timestamp rules.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { adminClient, createNode, createPod, rawRequest, serviceAccountToken, startCluster, type DevCluster, type RawReply } from '../support/cluster.js';
import { generateProvenKey, type PodCertificateKeyType } from '../../src/devcluster/pod-certificate-keys.js';
import { createCsr, createRootCa, generateKeyPair, FastLeafIssuer, caKeyMaterial, exportSpkiDer } from '../../src/pki/index.js';

const NS = 'pcr-app';
const SIGNER = 'certbroker.io/spiffe';
const BASE = `/apis/certificates.k8s.io/v1beta1/namespaces/${NS}/podcertificaterequests`;
let cluster: DevCluster;
const uids: Record<string, string> = {};

function asNode(node: string): Record<string, string> {
  return { 'impersonate-user': `system:node:${node}`, 'impersonate-group': 'system:nodes' };
}

async function send(method: string, path: string, body: unknown, o: { node?: string; token?: string } = {}): Promise<RawReply & { json: Record<string, any> }> {
  const r = await rawRequest(cluster, method, path, {
    body: JSON.stringify(body),
    contentType: 'application/json',
    ...(o.node ? { headers: asNode(o.node) } : {}),
    ...(o.token ? { token: o.token } : {}),
  });
  return { ...r, json: JSON.parse(r.text) as Record<string, any> };
}

interface PcrInput {
  readonly pod?: string;
  readonly node?: string;
  readonly keyType?: PodCertificateKeyType;
  readonly spec?: Record<string, unknown>;
  readonly proofFor?: string;
}

async function pcrBody(o: PcrInput = {}): Promise<Record<string, unknown>> {
  const pod = o.pod ?? 'web-a';
  const node = o.node ?? 'node-a';
  const key = await generateProvenKey(o.keyType ?? 'ECDSAP256', o.proofFor ?? uids[pod]!);
  return {
    apiVersion: 'certificates.k8s.io/v1beta1',
    kind: 'PodCertificateRequest',
    metadata: { generateName: 'req-' },
    spec: {
      signerName: SIGNER,
      podName: pod,
      podUID: uids[pod],
      serviceAccountName: 'web',
      serviceAccountUID: uids['sa:web'],
      nodeName: node,
      nodeUID: uids[`node:${node}`],
      pkixPublicKey: key.spkiDer.toString('base64'),
      proofOfPossession: key.proof.toString('base64'),
      ...o.spec,
    },
  };
}

before(async () => {
  cluster = await startCluster();
  for (const n of ['node-a', 'node-b']) uids[`node:${n}`] = (await createNode(cluster, { name: n })).metadata!.uid!;
  uids['web-a'] = (await createPod(cluster, { namespace: NS, name: 'web-a', serviceAccountName: 'web', nodeName: 'node-a' })).metadata!.uid!;
  uids['web-b'] = (await createPod(cluster, { namespace: NS, name: 'web-b', serviceAccountName: 'web', nodeName: 'node-b' })).metadata!.uid!;
  uids['sa:web'] = (await adminClient(cluster).core.readNamespacedServiceAccount({ namespace: NS, name: 'web' })).metadata!.uid!;
});
after(() => cluster?.close());

test('a node creates a request for its own pod: every key kind kubelet makes, status cleared, 24 h default', async () => {
  for (const keyType of ['ECDSAP256', 'ECDSAP384', 'ECDSAP521', 'ED25519', 'RSA3072'] as const) {
    const body = await pcrBody({ keyType });
    (body as { status?: unknown }).status = { certificateChain: 'smuggled' };
    const r = await send('POST', BASE, body, { node: 'node-a' });
    assert.equal(r.code, 201, `${keyType}: ${r.text}`);
    assert.match(r.json.metadata.name, /^req-/);
    assert.equal(r.json.spec.maxExpirationSeconds, 86400);
    assert.deepEqual(r.json.status, {}, 'status is cleared on create');
  }
  const discovery = await rawRequest(cluster, 'GET', '/apis/certificates.k8s.io/v1beta1');
  const resources = (JSON.parse(discovery.text) as { resources: Array<{ name: string; shortNames?: string[] }> }).resources;
  assert.deepEqual(resources.find((x) => x.name === 'podcertificaterequests')?.shortNames, ['pcr']);
  assert.ok(resources.some((x) => x.name === 'podcertificaterequests/status'));
});

test('NodeRestriction: another node cannot ask for the pod, nor name itself for a pod bound elsewhere', async () => {
  const other = await send('POST', BASE, await pcrBody({ node: 'node-a' }), { node: 'node-b' });
  assert.equal(other.code, 403, other.text);
  assert.equal(other.json.reason, 'Forbidden');
  assert.match(other.json.message, /PodCertificateRequest\.Spec\.NodeName="node-a", which is not the requesting node "node-b"/);
  const rebound = await send('POST', BASE, await pcrBody({ pod: 'web-a', node: 'node-b' }), { node: 'node-b' });
  assert.equal(rebound.code, 403, rebound.text);
  assert.match(rebound.json.message, /pod "pcr-app\/web-a" is not running on node "node-b" named in the PodCertificateRequest/);
  const sa = await send('POST', BASE, await pcrBody({ spec: { serviceAccountName: 'default' } }), { node: 'node-a' });
  assert.equal(sa.code, 403, sa.text);
  assert.match(sa.json.message, /contains serviceAccountName \("default"\) that differs from running pod \("web"\)/);
  for (const [field, want] of [['podUID', /contains pod UID/], ['serviceAccountUID', /names service account UID/], ['nodeUID', /names node UID/]] as const) {
    const body = await pcrBody({ spec: { [field]: '00000000-0000-0000-0000-000000000000' }, ...(field === 'podUID' ? { proofFor: '00000000-0000-0000-0000-000000000000' } : {}) });
    const r = await send('POST', BASE, body, { node: 'node-a' });
    assert.equal(r.code, 500, `${field}: ${r.text}`);
    assert.match(r.json.message, want);
  }
  const list = await send('GET', `${BASE}?fieldSelector=spec.nodeName%3Dnode-b`, undefined);
  assert.equal(list.json.items.length, 0, 'nothing was stored for node-b');
});

test('validation: proof of possession, key sizes, expiration range, fields', async () => {
  const forged = await send('POST', BASE, await pcrBody({ proofFor: uids['web-b']! }), { node: 'node-a' });
  assert.equal(forged.code, 422, forged.text);
  assert.match(forged.json.message, /spec\.proofOfPossession: Invalid value: could not verify proof-of-possession signature/);
  const rsa2048 = await generateKeyPair({ kind: 'rsa', bits: 2048 });
  const small = await send('POST', BASE, await pcrBody({ spec: { pkixPublicKey: exportSpkiDer(rsa2048.publicKey).toString('base64') } }), { node: 'node-a' });
  assert.equal(small.code, 422);
  assert.match(small.json.message, /RSA keys must have modulus size 3072 or 4096/);
  for (const [seconds, ok] of [[3599, false], [3600, true], [7884000, true], [7884001, false]] as const) {
    const r = await send('POST', BASE, await pcrBody({ spec: { maxExpirationSeconds: seconds } }), { node: 'node-a' });
    assert.equal(r.code, ok ? 201 : 422, `${seconds}: ${r.text}`);
    if (!ok) assert.match(r.json.message, /spec\.maxExpirationSeconds: Invalid value: \d+: must be in the range \[3600, 7884000\]/);
  }
  const kube = await send('POST', BASE, await pcrBody({ spec: { signerName: 'kubernetes.io/kube-apiserver-client-pod', maxExpirationSeconds: 86401 } }), { node: 'node-a' });
  assert.equal(kube.code, 422);
  assert.match(kube.json.message, /must be in the range \[3600, 86400\]/);
  const bad = await send('POST', BASE, await pcrBody({ spec: { signerName: 'nodomain', podUID: '', unverifiedUserAnnotations: { plain: 'x' } }, proofFor: '' }), { node: 'node-a' });
  assert.equal(bad.code, 422);
  const fields = (bad.json.details.causes as Array<{ field: string }>).map((c) => c.field);
  assert.deepEqual(fields.slice(0, 3), ['spec.signerName', 'spec.unverifiedUserAnnotations', 'spec.podUID']);
});

test('stubPKCS10Request (1.36): a verified PKCS#10 instead of pkixPublicKey + proofOfPossession, never both', async () => {
  const keys = await generateKeyPair();
  const csr = createCsr({ privateKey: keys.privateKey, uri: 'spiffe://ignored/x' });
  const stub = await send('POST', BASE, await pcrBody({ spec: { pkixPublicKey: undefined, proofOfPossession: undefined, stubPKCS10Request: Buffer.from(csr.der).toString('base64') } }), { node: 'node-a' });
  assert.equal(stub.code, 201, stub.text);
  const both = await send('POST', BASE, await pcrBody({ spec: { stubPKCS10Request: Buffer.from(csr.der).toString('base64') } }), { node: 'node-a' });
  assert.equal(both.code, 422);
  assert.match(both.json.message, /spec\.pkixPublicKey: Forbidden: must be empty when spec\.stubPKCS10Request is set/);
  const tampered = Buffer.from(csr.der);
  tampered[tampered.length - 5]! ^= 0xff;
  const broken = await send('POST', BASE, await pcrBody({ spec: { pkixPublicKey: undefined, proofOfPossession: undefined, stubPKCS10Request: tampered.toString('base64') } }), { node: 'node-a' });
  assert.equal(broken.code, 422);
  assert.match(broken.json.message, /spec\.stubPKCS10Request/);
});

/** A leaf for the request's key from a throwaway root, with the times the API server checks. */
async function issuedStatus(pcr: Record<string, any>, o: { lifetimeSeconds?: number; refreshOffsetMs?: number } = {}): Promise<Record<string, unknown>> {
  const root = await createRootCa({ subject: 'O=test, CN=root', ttlSeconds: 86400 * 30 });
  const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
  const leaf = issuer.issueForKey({ spki: Buffer.from(pcr.spec.pkixPublicKey, 'base64'), spiffeId: 'spiffe://cluster.local/ns/pcr-app/sa/web', ttlSeconds: (o.lifetimeSeconds ?? 7200) - 120 });
  const x = new X509Certificate(leaf.pem);
  const nb = Date.parse(x.validFrom);
  const na = Date.parse(x.validTo);
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
  return {
    conditions: [{ type: 'Issued', status: 'True', reason: 'Issued', message: 'ok', lastTransitionTime: iso(Date.now()) }],
    certificateChain: leaf.pem + root.pem,
    notBefore: iso(nb),
    notAfter: iso(na),
    beginRefreshAt: iso(nb + (o.refreshOffsetMs ?? (na - nb) / 2)),
  };
}

test('spec is immutable; status only through /status, by a caller allowed to sign, under the condition rules', async () => {
  const created = (await send('POST', BASE, await pcrBody(), { node: 'node-a' })).json;
  const url = `${BASE}/${created.metadata.name}`;
  const respec = await send('PUT', url, { ...created, spec: { ...created.spec, podName: 'web-b' } });
  assert.equal(respec.code, 422);
  assert.match(respec.json.message, /spec: Invalid value: field is immutable/);
  const status = await issuedStatus(created);
  const viaMain = await send('PUT', url, { ...created, status });
  assert.equal(viaMain.code, 200);
  assert.deepEqual(viaMain.json.status, {}, 'a write of the object keeps the stored status');

  const { rbac } = adminClient(cluster);
  await adminClient(cluster).core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: 'signer' } } });
  await rbac.createClusterRole({ body: { metadata: { name: 'pcr-status' }, rules: [{ apiGroups: ['certificates.k8s.io'], resources: ['podcertificaterequests', 'podcertificaterequests/status'], verbs: ['get', 'update'] }] } });
  await rbac.createClusterRoleBinding({ body: { metadata: { name: 'pcr-status' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pcr-status' }, subjects: [{ kind: 'ServiceAccount', name: 'signer', namespace: NS }] } });
  const token = await serviceAccountToken(cluster, { namespace: NS, serviceAccountName: 'signer' });
  const unsigned = await send('PUT', `${url}/status`, { ...viaMain.json, status }, { token });
  assert.equal(unsigned.code, 422, unsigned.text);
  assert.match(unsigned.json.message, /spec\.signerName: Forbidden: User "system:serviceaccount:pcr-app:signer" is not permitted to "sign" for signer "certbroker\.io\/spiffe"/);

  await rbac.createClusterRole({ body: { metadata: { name: 'pcr-sign' }, rules: [{ apiGroups: ['certificates.k8s.io'], resources: ['signers'], resourceNames: ['certbroker.io/*'], verbs: ['sign'] }] } });
  await rbac.createClusterRoleBinding({ body: { metadata: { name: 'pcr-sign' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pcr-sign' }, subjects: [{ kind: 'ServiceAccount', name: 'signer', namespace: NS }] } });
  const noTimes = await send('PUT', `${url}/status`, { ...viaMain.json, status: { ...status, beginRefreshAt: undefined } }, { token });
  assert.equal(noTimes.code, 422);
  assert.match(noTimes.json.message, /status\.beginRefreshAt: Required value/);
  const early = await send('PUT', `${url}/status`, { ...viaMain.json, status: await issuedStatus(created, { refreshOffsetMs: 60_000 }) }, { token });
  assert.match(early.json.message, /must be at least 10 minutes after status\.notBefore/);
  const tooLong = await send('PUT', `${url}/status`, { ...viaMain.json, status: await issuedStatus(created, { lifetimeSeconds: 86400 * 2 }) }, { token });
  assert.match(tooLong.json.message, /leaf certificate lifetime must be <= spec\.maxExpirationSeconds \(86400\)/);
  const other = (await send('POST', BASE, await pcrBody(), { node: 'node-a' })).json;
  const wrongKey = await send('PUT', `${url}/status`, { ...viaMain.json, status: await issuedStatus(other) }, { token });
  assert.match(wrongKey.json.message, /leaf certificate was not issued to the requested public key/);
  const two = await send('PUT', `${url}/status`, { ...viaMain.json, status: { ...status, conditions: [...(status.conditions as object[]), { type: 'Denied', status: 'True', reason: 'No', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] } }, { token });
  assert.match(two.json.message, /There may be at most one condition with type "Issued", "Denied", or "Failed"/);

  const issued = await send('PUT', `${url}/status`, { ...viaMain.json, metadata: { ...viaMain.json.metadata, labels: { smuggled: 'yes' }, ownerReferences: undefined }, status }, { token });
  assert.equal(issued.code, 200, issued.text);
  assert.equal(issued.json.status.certificateChain, status.certificateChain);
  assert.equal(issued.json.metadata.labels, undefined, 'a status write changes no metadata (ResetObjectMetaForStatus)');
  const again = await send('PUT', `${url}/status`, { ...issued.json, status: { conditions: [{ type: 'Failed', status: 'True', reason: 'Late', message: '', lastTransitionTime: '2026-01-01T00:00:00Z' }] } }, { token });
  assert.equal(again.code, 422);
  assert.match(again.json.message, /immutable after PodCertificateRequest is issued, denied, or failed/);
  const denyOther = await send('PUT', `${BASE}/${other.metadata.name}/status`, { ...other, status: { conditions: [{ type: 'Denied', status: 'True', reason: 'UnsupportedKeyType', message: 'no', lastTransitionTime: '2026-01-01T00:00:00Z' }], notAfter: '2026-01-01T00:00:00Z' } }, { token });
  assert.match(denyOther.json.message, /non-condition status fields must be empty when denying or failing/);
});

test('pods: a podCertificate source is validated as the API server does (signer, key type, expiration, paths, annotations)', async () => {
  const pod = (sources: unknown[]) => ({
    apiVersion: 'v1', kind: 'Pod', metadata: { name: 'bad-volume' },
    spec: { nodeName: 'node-a', containers: [{ name: 'c', image: 'i' }], volumes: [{ name: 'svid', projected: { sources } }] },
  });
  const r = await send('POST', `/api/v1/namespaces/${NS}/pods`, pod([
    { podCertificate: { signerName: 'no-slash', keyType: 'DSA1024', maxExpirationSeconds: 60, credentialBundlePath: '../escape' } },
    { podCertificate: { signerName: SIGNER, keyType: 'ECDSAP256' } },
    { podCertificate: { signerName: SIGNER, keyType: 'ECDSAP256', keyPath: 'a', certificateChainPath: 'a', userAnnotations: { nodomain: 'x' } } },
  ]));
  assert.equal(r.code, 422, r.text);
  const at = 'spec.volumes[0].projected.sources';
  assert.deepEqual((r.json.details.causes as Array<{ field: string }>).map((c) => c.field), [
    `${at}[0].podCertificate.signerName`,
    `${at}[0].podCertificate.keyType`,
    `${at}[0].podCertificate.maxExpirationSeconds`,
    `${at}[0].podCertificate.credentialBundlePath`,
    `${at}[1].podCertificate`,
    `${at}[2].podCertificate.certificateChainPath`,
    `${at}[2].podCertificate.userAnnotations`,
  ]);
  assert.match(r.text, /Unsupported value: \\"DSA1024\\": supported values: \\"RSA3072\\", \\"RSA4096\\", \\"ECDSAP256\\", \\"ECDSAP384\\", \\"ECDSAP521\\", \\"ED25519\\"/);
  const ok = await send('POST', `/api/v1/namespaces/${NS}/pods`, pod([{ podCertificate: { signerName: SIGNER, keyType: 'ED25519', keyPath: 'k', certificateChainPath: 'c' } }]));
  assert.equal(ok.code, 201, ok.text);
});
