/**
 * The CSR client the CA's kubernetes-csr backend and the k8s-signer use: its calls reuse one
 * kept-alive TLS connection to the API server (before, client-node's per-request agent meant a
 * TCP + TLS handshake per call, five per certificate), an aborted call still closes its socket,
 * and `close()` frees the kept connection.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { CsrClient, type CsrObject } from '../../src/kube/csr.js';
import { createCsr, generateKeyPair } from '../../src/pki/index.js';
import { kubeConfigFor, startCluster, type DevCluster } from '../support/cluster.js';
import { until } from '../support/until.js';

let cluster: DevCluster;
let request: string;

before(async () => {
  cluster = await startCluster();
  const { privateKey } = await generateKeyPair();
  request = Buffer.from(createCsr({ privateKey, uri: 'spiffe://cluster.local/ns/default/sa/sleep' }).pem).toString('base64');
});
after(() => cluster?.close());

const csr = (name: string): CsrObject => ({
  apiVersion: 'certificates.k8s.io/v1',
  kind: 'CertificateSigningRequest',
  metadata: { name },
  spec: { request, signerName: 'example.com/spiffe', usages: ['digital signature', 'client auth'], expirationSeconds: 3600 },
});


test('sequential CSR calls share one kept-alive connection; close() frees it', async () => {
  const client = new CsrClient(kubeConfigFor(cluster, cluster.adminToken));
  const before = cluster.acceptedConnections;
  const signal = new AbortController().signal;
  try {
    for (let i = 0; i < 4; i++) {
      const created = await client.create(csr(`keep-${i}`), signal);
      await client.addApprovalCondition(created, { type: 'Approved', status: 'True', reason: 'Test', message: 'approved by the test' }, signal);
      await client.delete(`keep-${i}`, signal);
    }
    assert.equal(cluster.acceptedConnections - before, 1, '12 calls over one connection');
  } finally {
    client.close();
  }
  await until(() => cluster.openConnections === 0, 'close() closed the kept connection', { timeoutMs: 5_000, pollMs: 10 });
});

test('an aborted call on a kept-alive client destroys its socket; the next call opens a new connection', async () => {
  const client = new CsrClient(kubeConfigFor(cluster, cluster.adminToken));
  try {
    await client.create(csr('abort-0'), new AbortController().signal);
    const before = cluster.acceptedConnections;
    cluster.faults.setLatency(60_000);
    const aborted = new AbortController();
    const pending = client.create(csr('abort-1'), aborted.signal);
    // The call is on the kept socket, held by the server; abort it (well before the 4 s idle close).
    await new Promise((r) => setTimeout(r, 100));
    aborted.abort(new Error('test abort'));
    await assert.rejects(pending, /test abort/);
    cluster.faults.setLatency(0);
    await until(() => cluster.openConnections === 0, 'the aborted call destroyed its kept socket', { timeoutMs: 1_500, pollMs: 10 });
    await client.delete('abort-0', new AbortController().signal);
    assert.equal(cluster.acceptedConnections - before, 1);
  } finally {
    client.close();
  }
});
