/**
 * A PodCertificateRequest the plug-in CA cannot honour ends Failed with reason SigningFailed
 * (issue 13 §2 "Failed on signing errors"): the k8s-signer's intermediate expires in 30 minutes,
 * so every leaf it could sign is clamped below the 1-hour minimum a PCR's certificate must
 * live. The devcluster's kubelet makes the request as the pod's node (deploy/ RBAC enforced);
 * the PCR gets a Failed condition, no certificate, and the pod does not start. Own cluster and
 * fake clock (pcr.e2e's shared clock is left alone).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { FakeClock } from '../support/fake-clock.js';
import { seededRng } from '../support/seeded-rng.js';
import { Scratch } from '../support/scratch.js';
import { kubectlMissing } from '../support/tools.js';
import { adminClient, createNode, createServiceAccount, kubeConfigFor, rawRequest, serviceAccountToken, startCluster, type DevCluster } from '../support/cluster.js';
import { identityObjectsOf, renderDeployWith } from '../deploy/manifests.js';
import { writeCacerts } from '../ca/support/pki-fixtures.js';
import { readK8sSignerConfig, startK8sSigner, type K8sSigner } from '../../src/k8s-signer/index.js';
import { silentLogger } from '../../src/core/log.js';
import { createIntermediateCa, createRootCa } from '../../src/pki/index.js';

const SIGNER = 'certbroker.io/spiffe';
const NS = 'pcr-failed';
const skip = kubectlMissing();
const scratch = Scratch.forFile('pcr-failed-');
const clock = new FakeClock(Date.now());
let cluster: DevCluster;
let signer: K8sSigner;

before(async () => {
  if (skip) return;
  cluster = await startCluster({ clock, podsDir: join(scratch.dir, 'pods'), rng: seededRng(11) });
  await cluster.apply(identityObjectsOf(await renderDeployWith(['components/kubernetes-csr', 'components/pod-certificates'])));
  await createNode(cluster, { name: 'node-a' });
  await adminClient(cluster).core.createNamespace({ body: { metadata: { name: NS } } });
  await createServiceAccount(cluster, { namespace: NS, name: 'web' });
  const root = await createRootCa({ subject: 'CN=Expiring Root, O=certbroker-test', ttlSeconds: 10 * 365 * 86400 });
  const intermediate = await createIntermediateCa({ subject: 'CN=Expiring Intermediate, O=certbroker-test', ttlSeconds: 30 * 60, issuer: { cert: root.cert, privateKey: root.privateKey } });
  await writeCacerts(scratch.dir, { root, intermediate });
  const token = await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'certbroker-k8s-signer', expirationSeconds: 48 * 3600 });
  const config = readK8sSignerConfig({ signerName: SIGNER, trustDomain: 'cluster.local', cacertsDir: scratch.dir, opsAddress: 'off' }, { K8S_SIGNER_CONTROLLERS: 'pcr' });
  signer = await startK8sSigner({ config, kubeConfig: kubeConfigFor(cluster, token), clock, rng: seededRng(5), logger: silentLogger });
});

after(async () => {
  await signer?.stop();
  await cluster?.close();
});

test('a CA that expires within the hour fails the PodCertificateRequest with SigningFailed; the pod does not start', { skip }, async () => {
  const body = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-1' },
    spec: {
      serviceAccountName: 'web',
      nodeName: 'node-a',
      containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }],
      volumes: [{ name: 'svid', projected: { sources: [{ podCertificate: { signerName: SIGNER, keyType: 'ECDSAP256', credentialBundlePath: 'credentialbundle.pem' } }] } }],
    },
  };
  const created = await rawRequest(cluster, 'POST', `/api/v1/namespaces/${NS}/pods`, { body: JSON.stringify(body), contentType: 'application/json' });
  assert.equal(created.code, 201, created.text);
  let concluded: Record<string, any> | undefined;
  for (let i = 0; i < 4000 && !concluded; i++) {
    const r = await rawRequest(cluster, 'GET', `/apis/certificates.k8s.io/v1beta1/namespaces/${NS}/podcertificaterequests`);
    const items = (JSON.parse(r.text) as { items: Array<Record<string, any>> }).items;
    concluded = items.find((p) => (p.status?.conditions ?? []).length > 0);
    if (!concluded) await new Promise((res) => setTimeout(res, 5));
  }
  assert.ok(concluded, 'the PCR got a condition');
  const conditions = concluded.status.conditions as Array<{ type: string; status: string; reason: string; message: string }>;
  assert.deepEqual(conditions.map((c) => [c.type, c.status, c.reason]), [['Failed', 'True', 'SigningFailed']]);
  assert.match(conditions[0]!.message, /expires within the hour/);
  assert.equal(concluded.status.certificateChain, undefined, 'no certificate was issued');
  const pod = await adminClient(cluster).core.readNamespacedPod({ namespace: NS, name: 'web-1' });
  assert.notEqual(pod.status?.phase, 'Running');
});
