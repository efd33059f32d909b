/**
 * A signer-name change leaves no old ClusterTrustBundle behind: the CA publishes under signer A
 * (the shipped `istio.io/istiod-ca`), is restarted under signer B, and as B's leader deletes A's
 * bundle (it carries the CA's `app.kubernetes.io/managed-by=certbroker-ca` label and its installation's, the same Lease) while B's is
 * created. A bundle someone else made without that label is left alone. The CA runs as its own
 * service account with deploy/rbac-ca.yaml (the devcluster enforces it, attest included) plus
 * the grant an operator adds for B's names, as the RBAC file says.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CertificatesV1beta1Api } from '@kubernetes/client-node';
import { createRootCa } from '../../src/pki/index.js';
import { CA_NAMESPACE, CA_SA, startCaEnv, type CaEnv } from './support/ca-env.js';
import { applyShippedCaRbac, readBundle } from './support/trust-bundles.js';
import { eventually } from '../broker/support/eventually.js';

const SIGNER_A = 'istio.io/istiod-ca';
const CTB_A = 'istio.io:istiod-ca:root-cert';
const SIGNER_B = 'example.com/new-ca';
const CTB_B = 'example.com:new-ca:root-cert';
const STRANGER = 'example.com:other-ca:root-cert';
let env: CaEnv;

before(async () => {
  env = await startCaEnv();
  await applyShippedCaRbac(env);
  const name = 'certbroker-ca-signer-b';
  await env.cluster.apply([
    {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name },
      rules: [
        { apiGroups: ['certificates.k8s.io'], resources: ['clustertrustbundles'], resourceNames: [CTB_B], verbs: ['get', 'update'] },
        { apiGroups: ['certificates.k8s.io'], resources: ['signers'], resourceNames: [SIGNER_B], verbs: ['attest'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name: CA_SA, namespace: CA_NAMESPACE }],
    },
  ]);
});
after(async () => {
  await env?.close();
});

const ctbApi = () => env.admin.makeApiClient(CertificatesV1beta1Api);

const bundle = (name: string) => readBundle(env, name);

const publishConfig = (signer: string, identity: string) => ({
  skipNamespaces: ['kube-public', 'kube-node-lease'],
  clusterTrustBundleSignerName: signer,
  leaseNamespace: CA_NAMESPACE,
  leaseName: 'certbroker-ca-publisher',
  identity,
  election: { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 500 },
});

test('restarted under another signer name, the leader deletes its old ClusterTrustBundle and leaves an unlabelled one alone', async () => {
  const strangerRoot = await createRootCa({ subject: 'CN=Someone Else, O=certbroker-test', ttlSeconds: 86400 });
  await ctbApi().createClusterTrustBundle({
    body: { apiVersion: 'certificates.k8s.io/v1beta1', kind: 'ClusterTrustBundle', metadata: { name: STRANGER }, spec: { signerName: 'example.com/other-ca', trustBundle: strangerRoot.pem } },
  });

  const first = await env.startCa({ publish: publishConfig(SIGNER_A, 'ca-a') });
  const roots = first.rootsPem();
  const a = await eventually('A\'s bundle', async () => ((await bundle(CTB_A))?.spec.trustBundle === roots ? true : undefined));
  assert.equal(a, true);
  assert.equal((await bundle(CTB_A))?.metadata?.labels?.['app.kubernetes.io/managed-by'], 'certbroker-ca');
  await first.stop();

  const second = await env.startCa({ publish: publishConfig(SIGNER_B, 'ca-b') });
  try {
    await eventually('B\'s bundle', async () => ((await bundle(CTB_B))?.spec.trustBundle === roots ? true : undefined));
    await eventually('A\'s bundle deleted', async () => ((await bundle(CTB_A)) === undefined ? true : undefined));
    await second.publisher!.idle();
    const stranger = await bundle(STRANGER);
    assert.equal(stranger?.spec.trustBundle, strangerRoot.pem, 'the unlabelled bundle is left alone');
    const metrics = await second.metrics.registry.metrics();
    assert.match(metrics, /certbroker_ca_trust_bundle_writes_total\{object="clustertrustbundle",action="delete",result="ok"\} 1/);
    const complaints = env.logs.filter((l) => l.includes('trust-bundle-publisher') && /"level":"(warn|error)"/.test(l));
    assert.deepEqual(complaints, [], 'the shipped RBAC (plus B\'s names) lets the list, watch and delete through');
  } finally {
    await second.stop();
  }
});
