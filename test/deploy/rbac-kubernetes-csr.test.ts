/**
 * deploy/ + components/kubernetes-csr, RBAC proven on the devcluster (SelfSubjectAccessReview as
 * each account): the CA may create, read, watch and delete CSRs and approve for
 * certbroker.io/spiffe only, never sign or write a status; the k8s-signer may read CSRs, write
 * their status and sign for certbroker.io/spiffe only, never create, approve or delete; the CA
 * mounts only the root of the `cacerts` Secret, the k8s-signer the whole plug-in CA.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { clientsFor, kubeConfigFor, serviceAccountToken, startCluster, type Clients, type DevCluster } from '../support/cluster.js';
import { kubectlMissing } from '../support/tools.js';
import { identityObjectsOf, renderDeployWith, type K8sObject } from './manifests.js';

const NS = 'istio-system';
const G = 'certificates.k8s.io';
const skip = kubectlMissing();
let cluster: DevCluster;
let rendered: K8sObject[];
const clients = new Map<string, Clients>();

interface Access {
  readonly verb: string;
  readonly resource: string;
  readonly subresource?: string;
  readonly name?: string;
}

async function allowed(sa: string, a: Access): Promise<boolean> {
  const res = await clients.get(sa)!.authz.createSelfSubjectAccessReview({
    body: { spec: { resourceAttributes: { verb: a.verb, group: G, resource: a.resource, ...(a.subresource ? { subresource: a.subresource } : {}), ...(a.name ? { name: a.name } : {}) } } },
  });
  return res.status?.allowed === true;
}

const csr = (verb: string, subresource?: string): Access => ({ verb, resource: 'certificatesigningrequests', ...(subresource ? { subresource } : {}) });
const signer = (verb: string, name: string): Access => ({ verb, resource: 'signers', name });

before(async () => {
  if (skip) return;
  cluster = await startCluster({ simulateKubelet: false });
  rendered = await renderDeployWith(['components/kubernetes-csr']);
  await cluster.apply(identityObjectsOf(rendered));
  for (const sa of ['certbroker-ca', 'certbroker-k8s-signer']) clients.set(sa, clientsFor(kubeConfigFor(cluster, await serviceAccountToken(cluster, { namespace: NS, serviceAccountName: sa }))));
});
after(() => cluster?.close());

test('the CA: create/get/list/watch/delete CSRs, approve for its signer only; no sign, no status', { skip }, async () => {
  for (const v of ['create', 'get', 'list', 'watch', 'delete']) assert.equal(await allowed('certbroker-ca', csr(v)), true, v);
  assert.equal(await allowed('certbroker-ca', csr('update', 'approval')), true);
  assert.equal(await allowed('certbroker-ca', signer('approve', 'certbroker.io/spiffe')), true);
  for (const a of [csr('update'), csr('update', 'status'), csr('patch', 'status'), csr('deletecollection'), signer('sign', 'certbroker.io/spiffe'), signer('approve', 'example.com/other'), signer('approve', 'kubernetes.io/kube-apiserver-client')]) {
    assert.equal(await allowed('certbroker-ca', a), false, JSON.stringify(a));
  }
});

test('the k8s-signer: get/list/watch CSRs, update /status, sign for its signer only; no create, approve or delete', { skip }, async () => {
  for (const v of ['get', 'list', 'watch']) assert.equal(await allowed('certbroker-k8s-signer', csr(v)), true, v);
  assert.equal(await allowed('certbroker-k8s-signer', csr('update', 'status')), true);
  assert.equal(await allowed('certbroker-k8s-signer', signer('sign', 'certbroker.io/spiffe')), true);
  for (const a of [csr('create'), csr('delete'), csr('update'), csr('update', 'approval'), signer('approve', 'certbroker.io/spiffe'), signer('sign', 'example.com/other'), signer('sign', 'kubernetes.io/kubelet-serving')]) {
    assert.equal(await allowed('certbroker-k8s-signer', a), false, JSON.stringify(a));
  }
});

test('the CA mounts only root-cert.pem of the cacerts Secret; the k8s-signer runs `k8s-signer` with the whole plug-in CA', { skip }, async () => {
  type Pod = { spec: { template: { spec: { containers: Array<{ args?: string[]; env?: Array<{ name: string; value?: string }> }>; volumes: Array<{ name: string; secret?: { secretName: string; items?: Array<{ key: string }> } }> } } } };
  const deployment = (name: string) => rendered.find((o) => o.kind === 'Deployment' && o.metadata.name === name) as unknown as Pod;
  const ca = deployment('certbroker-ca').spec.template.spec;
  assert.deepEqual(ca.volumes.find((v) => v.name === 'cacerts')?.secret?.items?.map((i) => i.key), ['root-cert.pem']);
  const env = Object.fromEntries((ca.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
  assert.equal(env.CA_SIGNER, 'kubernetes-csr');
  assert.equal(env.CA_K8S_SIGNER_NAME, 'certbroker.io/spiffe');
  assert.equal(env.CA_K8S_CSR_ROOTS_FILE, '/etc/cacerts/root-cert.pem');
  const signerPod = deployment('certbroker-k8s-signer').spec.template.spec;
  assert.deepEqual(signerPod.containers[0]!.args, ['k8s-signer']);
  assert.equal(signerPod.volumes.find((v) => v.name === 'cacerts')?.secret?.items, undefined);
});
