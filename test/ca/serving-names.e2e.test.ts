/**
 * Serving names (`certbroker.io/serving-names` in the request metadata) end to end: the CA puts
 * DNS/IP SANs on a trusted node agent's own SVID when every name is on its allow-list, and
 * refuses everything else as istiod refuses authorization failures (the generic UNAUTHENTICATED,
 * the precise reason in the log); a value that is not a list of names is INVALID_ARGUMENT.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import type { CaServer } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { caClient, lastDenialReason, startCaEnv, TD, waitForIndex, type CaClient, type CaEnv, type CertResult } from './support/ca-env.js';
import { newCsr, opensslVerifyChain } from './support/pki-fixtures.js';
import { opensslMissing } from '../support/tools.js';

const KEY = 'certbroker.io/serving-names';
const ztunnelId = `spiffe://${TD}/ns/istio-system/sa/ztunnel`;
let env: CaEnv;
let ca: CaServer;
let altCa: CaServer;
let client: CaClient;
let altClient: CaClient;
let nodeToken: string;

before(async () => {
  env = await startCaEnv();
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  ca = await env.startCa();
  altCa = await env.startCa({ grantableServingNames: ['localhost', 'Node-CA.istio-system.svc'], signingWorkers: 1 }); // workers: named leaves bypass the pool
  client = caClient(ca.port, ca.rootsPem());
  altClient = caClient(altCa.port, altCa.rootsPem());
  for (const c of [ca, altCa]) await waitForIndex(c, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  nodeToken = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
});

after(async () => {
  client?.close();
  altClient?.close();
  await env?.close();
});

function assertDenied(r: CertResult, reason: string): void {
  assert.equal(r.code, status.UNAUTHENTICATED, JSON.stringify(r).slice(0, 200));
  assert.equal(r.details, 'authentication failed');
  assert.equal(lastDenialReason(env.logs), reason);
}

test('a trusted node agent with a pod-bound token gets its own SVID with the names: one URI SAN, DNS and IP SANs, verifiable for localhost', { skip: opensslMissing() }, async () => {
  const r = await client.create({ token: nodeToken, csr: await newCsr(), metadata: { [KEY]: 'localhost, 127.0.0.1,::1' } });
  assert.equal(r.code, undefined, JSON.stringify(r));
  const leaf = new X509Certificate(r.chain![0]!);
  assert.equal(leaf.subjectAltName, `DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1, URI:${ztunnelId}`);
  assert.equal(checkX509Svid(r.chain![0]!)?.id, ztunnelId, 'still an X509-SVID of the caller');
  assert.equal(leaf.checkHost('localhost'), 'localhost');
  assert.equal(leaf.checkIP('127.0.0.1'), '127.0.0.1');
  assert.match(await opensslVerifyChain(r.chain!), /OK/);
  // Without the key the same caller gets istiod's leaf: the URI SAN alone.
  const plain = await client.create({ token: nodeToken, csr: await newCsr() });
  assert.equal(new X509Certificate(plain.chain![0]!).subjectAltName, `URI:${ztunnelId}`);
});

test('names off the allow-list, impersonation, an untrusted or unbound caller: UNAUTHENTICATED with the reason logged', async () => {
  const csr = await newCsr();
  assertDenied(await client.create({ token: nodeToken, csr, metadata: { [KEY]: 'localhost,evil.example.com' } }), 'ERR_CA_SERVING_NAME_NOT_ALLOWED');
  assertDenied(await client.create({ token: nodeToken, csr, metadata: { [KEY]: '10.0.0.1' } }), 'ERR_CA_SERVING_NAME_NOT_ALLOWED');
  assertDenied(
    await client.create({ token: nodeToken, csr, impersonate: `spiffe://${TD}/ns/default/sa/sleep`, metadata: { [KEY]: 'localhost' } }),
    'ERR_CA_SERVING_NAMES_IMPERSONATED',
  );
  const sleep = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
  assertDenied(await client.create({ token: sleep, csr, metadata: { [KEY]: 'localhost' } }), 'ERR_CA_NODE_NOT_TRUSTED');
  const unbound = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel' });
  assertDenied(await client.create({ token: unbound, csr, metadata: { [KEY]: 'localhost' } }), 'ERR_CA_CALLER_NOT_POD_BOUND');
  // The same untrusted caller without the key still gets its own plain SVID.
  assert.equal(checkX509Svid((await client.create({ token: sleep, csr })).chain![0]!)?.id, `spiffe://${TD}/ns/default/sa/sleep`);
});

test('a value that is not a list of host names or IP literals is INVALID_ARGUMENT', async () => {
  const csr = await newCsr();
  for (const bad of ['*.svc', 'a b', Array.from({ length: 17 }, (_, i) => `n${i}.local`).join(',')]) {
    const r = await client.create({ token: nodeToken, csr, metadata: { [KEY]: bad } });
    assert.equal(r.code, status.INVALID_ARGUMENT, `${bad}: ${JSON.stringify(r)}`);
  }
});

test('CA_GRANTABLE_SERVING_NAMES decides: an alt host name is granted where configured (any case), loopback addresses no longer are', async () => {
  const csr = await newCsr();
  const r = await altClient.create({ token: nodeToken, csr, metadata: { [KEY]: 'node-ca.istio-system.svc,localhost' } });
  assert.equal(r.code, undefined, JSON.stringify(r));
  assert.equal(new X509Certificate(r.chain![0]!).subjectAltName, `DNS:node-ca.istio-system.svc, DNS:localhost, URI:${ztunnelId}`);
  const ip = await altClient.create({ token: nodeToken, csr, metadata: { [KEY]: '127.0.0.1' } });
  assert.equal(ip.code, status.UNAUTHENTICATED);
});
