/**
 * The published bundle follows the signer's roots: a plug-in CA whose root-cert.pem gains a
 * second root (the first step of a root rotation) is published with both, in the ConfigMaps and
 * the ClusterTrustBundle, and with one again when the old root is dropped. deploy/ RBAC enforced.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CertificatesV1beta1Api } from '@kubernetes/client-node';
import type { CaServer } from '../../src/ca/index.js';
import { CA_NAMESPACE, startCaEnv, type CaEnv } from './support/ca-env.js';
import { applyShippedCaRbac } from './support/trust-bundles.js';
import { makePluginCa, tempDir, writeCacerts, type PluginCa } from './support/pki-fixtures.js';
import { eventually } from '../broker/support/eventually.js';

let env: CaEnv;
let dir: { path: string; remove: () => Promise<void> };
let ca: CaServer;
let current: PluginCa;
let next: PluginCa;

before(async () => {
  env = await startCaEnv();
  await applyShippedCaRbac(env);
  await env.ensureNamespace('app');
  dir = await tempDir('ca-rotation-publish-');
  current = await makePluginCa('Current');
  next = await makePluginCa('Next');
  await writeCacerts(dir.path, current);
});
after(async () => {
  await env?.close();
  await dir?.remove();
});

async function publishedRoots(): Promise<{ configMap: string | undefined; bundle: string | undefined }> {
  const cm = await env.core.readNamespacedConfigMap({ namespace: 'app', name: 'istio-ca-root-cert' }).catch(() => undefined);
  const ctb = await env.admin.makeApiClient(CertificatesV1beta1Api).readClusterTrustBundle({ name: 'istio.io:istiod-ca:root-cert' }).catch(() => undefined);
  return { configMap: cm?.data?.['root-cert.pem'], bundle: ctb?.spec.trustBundle };
}

function until(want: string): Promise<true> {
  return eventually(`both published as ${want.split('BEGIN').length - 1} root(s)`, async () => {
    const p = await publishedRoots();
    return p.configMap === want && p.bundle === want ? true : undefined;
  });
}

test('a second root in root-cert.pem is published everywhere with the first; dropping the old one is published too', async () => {
  ca = await env.startCa({
    signer: { kind: 'cacerts', dir: dir.path, pollIntervalMs: 50 },
    publish: {
      skipNamespaces: [], clusterTrustBundleSignerName: 'istio.io/istiod-ca', leaseNamespace: CA_NAMESPACE, leaseName: 'certbroker-ca-publisher', identity: 'rotating',
      election: { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 500 },
    },
  });
  await until(current.root.pem);
  await writeCacerts(dir.path, current, [next.root]);
  await until(current.root.pem + next.root.pem);
  assert.equal(ca.rootsPem(), current.root.pem + next.root.pem, 'what is published is what the CA answers with');
  await writeCacerts(dir.path, next);
  await until(next.root.pem);
});
