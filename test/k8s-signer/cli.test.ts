/**
 * `certbroker k8s-signer` as a process: a configuration error exits 1 listing the problems; with
 * its own service account (the RBAC of deploy/components/kubernetes-csr) and a cacerts directory
 * it signs an approved CSR, and SIGTERM stops it with exit code 0.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CertificatesV1Api } from '@kubernetes/client-node';
import { createCsr, generateKeyPair } from '../../src/pki/index.js';
import { makePluginCa, writeCacerts } from '../ca/support/pki-fixtures.js';
import { identityObjectsOf, renderDeployWith } from '../deploy/manifests.js';
import { CliProcess } from '../support/cli-process.js';
import { adminClient, kubectl, serviceAccountToken, startCluster, type DevCluster } from '../support/cluster.js';
import { tempDirSync, removeTempDirSync } from '../support/scratch.js';
import { kubectlMissing } from '../support/tools.js';

const skip = kubectlMissing();
let cluster: DevCluster;
let dir: string;

before(async () => {
  if (skip) return;
  dir = tempDirSync('k8s-signer-cli-');
  cluster = await startCluster({ simulateKubelet: false });
  await cluster.apply(identityObjectsOf(await renderDeployWith(['components/kubernetes-csr'])));
  const token = await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'certbroker-k8s-signer' });
  writeFileSync(join(dir, 'kubeconfig'), cluster.kubeconfigYaml({ token }), { mode: 0o600 });
  mkdirSync(join(dir, 'cacerts'));
  await writeCacerts(join(dir, 'cacerts'), await makePluginCa('CLI'));
});
after(async () => {
  await cluster?.close();
  if (dir) removeTempDirSync(dir);
});

test('a bad configuration exits 1 naming every problem', { skip }, async () => {
  const p = new CliProcess(['k8s-signer', '--signer-name', 'nodomain', '--ops-address', 'nope'], {});
  const exit = await p.exit(30_000);
  assert.equal(exit?.code, 1);
  const text = p.lines.join('\n');
  assert.match(text, /K8S_SIGNER_NAME \(--signer-name\) "nodomain"/);
  assert.match(text, /K8S_SIGNER_OPS_ADDRESS="nope"/);
});

test('signs an approved CSR as its own service account, and stops on SIGTERM with exit code 0', { skip }, async () => {
  const p = new CliProcess(['k8s-signer', '--signer-name', 'certbroker.io/spiffe', '--cacerts-dir', join(dir, 'cacerts'), '--kubeconfig', join(dir, 'kubeconfig'), '--ops-address', '127.0.0.1:0'], { LOG_LEVEL: 'info' });
  try {
    await p.waitForLog('k8s-signer running');
    const api = adminClient(cluster).kc.makeApiClient(CertificatesV1Api);
    const { privateKey } = await generateKeyPair();
    const request = Buffer.from(createCsr({ privateKey, uri: 'spiffe://cluster.local/ns/default/sa/sleep' }).pem).toString('base64');
    await api.createCertificateSigningRequest({ body: { metadata: { name: 'cli' }, spec: { request, signerName: 'certbroker.io/spiffe', usages: ['digital signature', 'client auth'] } } });
    assert.equal((await kubectl(cluster, ['certificate', 'approve', 'cli'])).code, 0);
    const signed = await p.waitForLog('CSR signed');
    assert.equal(signed.csr, 'cli');
    assert.equal(signed.identity, 'spiffe://cluster.local/ns/default/sa/sleep');
    assert.ok((await api.readCertificateSigningRequest({ name: 'cli' })).status?.certificate);
    p.child.kill('SIGTERM');
    const exit = await p.exit(20_000);
    assert.deepEqual(exit, { code: 0, signal: null }, p.tail());
  } finally {
    p.kill();
  }
});
