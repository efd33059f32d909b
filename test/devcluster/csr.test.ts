/**
 * CertificateSigningRequests on the devcluster as kube-apiserver serves them, driven by the real
 * kubectl (`create -f`, `get csr` columns, `certificate approve|deny` with protobuf bodies) and
 * client-node: create validation (signerName rule, usages, expirationSeconds >= 600, a PEM CSR),
 * spec immutability, the approval/status split (Approved/Denied only through /approval, the
 * certificate only through /status and never changed once set, the condition rules).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiException, CertificatesV1Api, type V1CertificateSigningRequest } from '@kubernetes/client-node';
import { createCsr, generateKeyPair } from '../../src/pki/index.js';
import { makePluginCa } from '../ca/support/pki-fixtures.js';
import { adminClient, kubectl, startCluster, type DevCluster } from '../support/cluster.js';
import { kubectlMissing } from '../support/tools.js';

const skip = kubectlMissing();
let cluster: DevCluster;
let api: CertificatesV1Api;
let requestB64: string;

before(async () => {
  cluster = await startCluster();
  api = adminClient(cluster).kc.makeApiClient(CertificatesV1Api);
  const { privateKey } = await generateKeyPair();
  requestB64 = Buffer.from(createCsr({ privateKey, uri: 'spiffe://cluster.local/ns/default/sa/sleep' }).pem).toString('base64');
});
after(() => cluster?.close());

const csrJson = (name: string, spec: Record<string, unknown> = {}) =>
  JSON.stringify({ apiVersion: 'certificates.k8s.io/v1', kind: 'CertificateSigningRequest', metadata: { name }, spec: { request: requestB64, signerName: 'example.com/spiffe', usages: ['digital signature', 'client auth'], expirationSeconds: 3600, ...spec } });

async function ok(args: string[], stdin?: string): Promise<string> {
  const r = await kubectl(cluster, args, stdin === undefined ? {} : { stdin });
  assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

async function refused(p: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ApiException, String(err));
    return { code: err.code, message: String((JSON.parse(String(err.body)) as { message?: string }).message) };
  }
  assert.fail('accepted');
}

test('kubectl get csr prints NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION, from Pending to Approved,Issued', { skip }, async () => {
  await ok(['create', '-f', '-'], csrJson('columns'));
  const row = async () => (await ok(['get', 'csr', 'columns'])).trim().split('\n').map((l) => l.split(/\s{2,}/));
  const [header, pending] = await row();
  assert.deepEqual(header, ['NAME', 'AGE', 'SIGNERNAME', 'REQUESTOR', 'REQUESTEDDURATION', 'CONDITION']);
  assert.deepEqual([pending![0], pending![2], pending![3], pending![4], pending![5]], ['columns', 'example.com/spiffe', 'devcluster-admin', '60m', 'Pending']);
  assert.match(await ok(['certificate', 'approve', 'columns']), /certificatesigningrequest.certificates.k8s.io\/columns approved/);
  assert.equal((await row())[1]![5], 'Approved');
  const csr = await api.readCertificateSigningRequest({ name: 'columns' });
  const approved = csr.status!.conditions!.find((c) => c.type === 'Approved')!;
  assert.equal(approved.reason, 'KubectlApprove');
  assert.ok(approved.lastUpdateTime && approved.lastTransitionTime, 'timestamps filled in');
  const cert = Buffer.from((await makePluginCa('Columns')).root.pem).toString('base64');
  await api.replaceCertificateSigningRequestStatus({ name: 'columns', body: { ...csr, status: { ...csr.status, certificate: cert } } });
  assert.equal((await row())[1]![5], 'Approved,Issued');
});

for (const [what, spec, expect] of [
  ['a signerName without a domain', { signerName: 'spiffe' }, /spec.signerName: Invalid value: "spiffe": must be a fully qualified domain and path of the form 'example.com\/signer-name'/],
  ['expirationSeconds below 600', { expirationSeconds: 599 }, /spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds \(10 minutes\)/],
  ['no usages', { usages: [] }, /spec.usages: Required value/],
  ['an unknown usage', { usages: ['digital signature', 'flying'] }, /spec.usages\[1\]: Unsupported value: "flying"/],
  ['a duplicate usage', { usages: ['client auth', 'client auth'] }, /spec.usages\[1\]: Duplicate value: "client auth"/],
  ['a request that is not a PEM CSR', { request: Buffer.from('hello').toString('base64') }, /spec.request: Invalid value: \[\]byte\{\.\.\.\}: PEM block type must be CERTIFICATE REQUEST/],
] as const) {
  test(`creating a CSR with ${what} is refused (422) as kube-apiserver words it`, { skip }, async () => {
    const r = await kubectl(cluster, ['create', '-f', '-'], { stdin: csrJson(`bad-${Math.random().toString(16).slice(2, 8)}`, spec) });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, expect);
  });
}

test('the spec of a CSR cannot change, Approved/Denied only through /approval, the certificate only through /status', { skip }, async () => {
  await ok(['create', '-f', '-'], csrJson('strategy'));
  let csr = await api.readCertificateSigningRequest({ name: 'strategy' });
  const updated = await api.replaceCertificateSigningRequest({ name: 'strategy', body: { ...csr, spec: { ...csr.spec, signerName: 'example.com/other' }, metadata: { ...csr.metadata, labels: { a: 'b' } } } });
  assert.equal(updated.spec.signerName, 'example.com/spiffe', 'spec kept');
  assert.deepEqual(updated.metadata?.labels, { a: 'b' }, 'metadata changes');
  const approved = { type: 'Approved', status: 'True', reason: 'Test', message: 'ok' };
  const viaStatus = await refused(api.replaceCertificateSigningRequestStatus({ name: 'strategy', body: { ...updated, status: { conditions: [approved] } } }));
  assert.equal(viaStatus.code, 422);
  assert.match(viaStatus.message, /status.conditions: Forbidden: updates may not add a condition of type "Approved"/);
  const falseApproval = await refused(api.replaceCertificateSigningRequestApproval({ name: 'strategy', body: { ...updated, status: { conditions: [{ ...approved, status: 'False' }] } } }));
  assert.match(falseApproval.message, /status.conditions\[0\].status: Unsupported value: "False": supported values: "True"/);
  const viaApproval = await api.replaceCertificateSigningRequestApproval({ name: 'strategy', body: { ...updated, status: { certificate: Buffer.from('x').toString('base64'), conditions: [approved] } } });
  assert.deepEqual(viaApproval.status?.conditions?.map((c) => c.type), ['Approved']);
  assert.equal(viaApproval.status?.certificate, undefined, 'no certificate through /approval');
  const both = await refused(api.replaceCertificateSigningRequestApproval({ name: 'strategy', body: { ...viaApproval, status: { conditions: [...viaApproval.status!.conditions!, { type: 'Denied', status: 'True', reason: 'No', message: 'no' }] } } }));
  assert.equal(both.code, 422);
  assert.match(both.message, /status.conditions\[1\].type: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive/);
  const removed = await refused(api.replaceCertificateSigningRequestApproval({ name: 'strategy', body: { ...viaApproval, status: { conditions: [] } } }));
  assert.match(removed.message, /updates may not remove a condition of type "Approved"/);
  const changedViaStatus = await api.replaceCertificateSigningRequestStatus({ name: 'strategy', body: { ...viaApproval, status: { conditions: [{ ...approved, reason: 'Rewritten' }] } } });
  assert.equal(changedViaStatus.status?.conditions?.[0]?.reason, 'Test', 'the stored Approved condition wins through /status');
  const latest = changedViaStatus;
  const notPem = await refused(api.replaceCertificateSigningRequestStatus({ name: 'strategy', body: { ...latest, status: { ...latest.status, certificate: Buffer.from('not pem').toString('base64') } } }));
  assert.match(notPem.message, /status.certificate: Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block/);
  const root = Buffer.from((await makePluginCa('Strategy')).root.pem).toString('base64');
  csr = await api.replaceCertificateSigningRequestStatus({ name: 'strategy', body: { ...latest, status: { ...latest.status, certificate: root } } });
  assert.equal(csr.status?.certificate, root);
  assert.deepEqual(csr.status?.conditions?.map((c) => c.type), ['Approved'], 'Approved stays through /status');
  const other = Buffer.from((await makePluginCa('Other')).root.pem).toString('base64');
  const changed = await refused(api.replaceCertificateSigningRequestStatus({ name: 'strategy', body: { ...csr, status: { ...csr.status, certificate: other } } }));
  assert.match(changed.message, /status.certificate: Forbidden: updates may not modify existing certificate content/);
  const failed = await api.replaceCertificateSigningRequestStatus({ name: 'strategy', body: { ...csr, status: { ...csr.status, conditions: [...csr.status!.conditions!, { type: 'Failed', status: 'True', reason: 'X', message: 'y' }] } } });
  const noFailed = await refused(api.replaceCertificateSigningRequestStatus({ name: 'strategy', body: { ...failed, status: { ...failed.status, conditions: failed.status!.conditions!.filter((c) => c.type !== 'Failed') } } }));
  assert.match(noFailed.message, /updates may not remove a condition of type "Failed"/);
});

test('kubectl certificate deny sets Denied with its reason; the CONDITION column says Denied', { skip }, async () => {
  await ok(['create', '-f', '-'], csrJson('denied'));
  assert.match(await ok(['certificate', 'deny', 'denied']), /certificatesigningrequest.certificates.k8s.io\/denied denied/);
  const csr: V1CertificateSigningRequest = await api.readCertificateSigningRequest({ name: 'denied' });
  assert.deepEqual(csr.status?.conditions?.map((c) => [c.type, c.status, c.reason]), [['Denied', 'True', 'KubectlDeny']]);
  assert.match(await ok(['get', 'csr', 'denied']), /denied\s+\S+\s+example.com\/spiffe\s+devcluster-admin\s+60m\s+Denied\n$/);
});
