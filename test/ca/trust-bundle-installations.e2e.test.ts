/**
 * Two CA installations on one cluster (each its own publisher Lease) publishing ClusterTrustBundles
 * under different signer names leave each other's bundle alone: neither deletes nor rewrites the
 * other's (same uid and resourceVersion, no delete counted), while each still deletes its own old
 * bundle after a signer-name change; a third installation under B's signer name leaves B's bundle
 * as it is (no label tug-of-war) and warns. A bundle an older CA left (the managed-by label without the
 * installation label) is not deleted either. Real publishers (Lease election, informers, writes)
 * against the devcluster; every wait is for a condition.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CertificatesV1beta1Api, type V1beta1ClusterTrustBundle } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { TrustBundlePublisher, type TrustBundlePublishConfig } from '../../src/ca/index.js';
import { createRootCa } from '../../src/pki/index.js';
import { CA_NAMESPACE, startCaEnv, type CaEnv } from './support/ca-env.js';
import { readBundle } from './support/trust-bundles.js';
import { eventually } from '../broker/support/eventually.js';

const SIGNER_A = 'example.com/ca-a';
const CTB_A = 'example.com:ca-a:root-cert';
const SIGNER_A2 = 'example.com/ca-a2';
const CTB_A2 = 'example.com:ca-a2:root-cert';
const SIGNER_B = 'example.com/ca-b';
const CTB_B = 'example.com:ca-b:root-cert';
const LEGACY = 'example.com:old-ca:root-cert';
let env: CaEnv;
let roots: string;

before(async () => {
  env = await startCaEnv();
  roots = (await createRootCa({ subject: 'CN=Shared Root, O=certbroker-test', ttlSeconds: 86400 })).pem;
});
after(async () => {
  await env?.close();
});

const ctbApi = () => env.admin.makeApiClient(CertificatesV1beta1Api);

const bundle = (name: string) => readBundle(env, name);

function publisher(signer: string, leaseName: string, registry: Registry): TrustBundlePublisher {
  const config: TrustBundlePublishConfig = {
    skipNamespaces: [],
    clusterTrustBundleSignerName: signer,
    leaseNamespace: CA_NAMESPACE,
    leaseName,
    identity: `${leaseName}-holder`,
    election: { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 500 },
  };
  // Both publish the same roots, so the istio-ca-root-cert ConfigMaps they share agree.
  return new TrustBundlePublisher({ config, kubeConfig: env.admin, roots: () => [roots], onRootsChange: () => () => {}, registry, logger: env.logger });
}

async function published(name: string): Promise<V1beta1ClusterTrustBundle> {
  return eventually(`${name} published`, async () => {
    const b = await bundle(name);
    return b?.spec.trustBundle.includes(roots.trim()) ? b : undefined;
  });
}

async function deletes(registry: Registry): Promise<number> {
  const m = await registry.getSingleMetric('certbroker_ca_trust_bundle_writes_total')?.get();
  return (m?.values ?? []).filter((v) => v.labels['action'] === 'delete' && v.labels['result'] === 'ok').reduce((n, v) => n + v.value, 0);
}

test('installations with different signer names never delete or rewrite each other\'s ClusterTrustBundle', async () => {
  await ctbApi().createClusterTrustBundle({
    body: {
      apiVersion: 'certificates.k8s.io/v1beta1', kind: 'ClusterTrustBundle',
      metadata: { name: LEGACY, labels: { 'app.kubernetes.io/managed-by': 'certbroker-ca' } },
      spec: { signerName: 'example.com/old-ca', trustBundle: roots },
    },
  });
  const regA = new Registry();
  const regB = new Registry();
  const a = publisher(SIGNER_A, 'ca-a-publisher', regA);
  await a.start();
  const b = publisher(SIGNER_B, 'ca-b-publisher', regB);
  let a2: TrustBundlePublisher | undefined;
  try {
    await eventually('A leads', () => a.isLeader);
    const firstA = await published(CTB_A);
    assert.equal(firstA.metadata?.labels?.['certbroker.io/ca-installation'], `${CA_NAMESPACE}.ca-a-publisher`);
    await a.idle();
    await b.start();
    await eventually('B leads', () => b.isLeader);
    const firstB = await published(CTB_B);
    await b.idle();
    await a.idle();
    await b.idle();
    const nowA = await bundle(CTB_A);
    assert.equal(nowA?.metadata?.uid, firstA.metadata?.uid, 'A\'s bundle is not deleted (and recreated) by B');
    assert.equal(nowA?.metadata?.resourceVersion, firstA.metadata?.resourceVersion, 'A\'s bundle is not rewritten by B');
    const nowB = await bundle(CTB_B);
    assert.equal(nowB?.metadata?.uid, firstB.metadata?.uid, 'B\'s bundle is not deleted by A');
    assert.equal(nowB?.metadata?.labels?.['certbroker.io/ca-installation'], `${CA_NAMESPACE}.ca-b-publisher`);
    assert.equal(await deletes(regA), 0);
    assert.equal(await deletes(regB), 0);

    // A third installation under B's signer name: B's bundle is not rewritten (nor fought over).
    const c = publisher(SIGNER_B, 'ca-c-publisher', new Registry());
    try {
      await c.start();
      await eventually('C leads', () => c.isLeader);
      await eventually('C warns', () => env.logs.some((l) => l.includes('belongs to another CA installation') && l.includes('ca-c-publisher')));
      await c.idle();
      await b.idle();
      const afterC = await bundle(CTB_B);
      assert.equal(afterC?.metadata?.resourceVersion, nowB?.metadata?.resourceVersion, 'B\'s bundle untouched by C');
      assert.equal(afterC?.metadata?.labels?.['certbroker.io/ca-installation'], `${CA_NAMESPACE}.ca-b-publisher`);
    } finally {
      await c.stop();
    }

    // Installation A changes its signer name: it deletes its own old bundle, not B's or the legacy one.
    await a.stop();
    const regA2 = new Registry();
    a2 = publisher(SIGNER_A2, 'ca-a-publisher', regA2);
    await a2.start();
    await eventually('A leads again', () => a2!.isLeader);
    await published(CTB_A2);
    await eventually('A\'s old bundle deleted', async () => ((await bundle(CTB_A)) === undefined ? true : undefined));
    await a2.idle();
    await b.idle();
    assert.equal(await deletes(regA2), 1);
    assert.equal((await bundle(CTB_B))?.metadata?.uid, firstB.metadata?.uid, 'B\'s bundle survives A\'s signer change');
    assert.ok(await bundle(LEGACY), 'a bundle without an installation label is nobody\'s to delete');
    assert.equal(await deletes(regB), 0);
  } finally {
    await a2?.stop();
    await b.stop();
    await a.stop();
  }
});
