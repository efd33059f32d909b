/**
 * istiod's node-authorization matrix, end to end: a real devcluster (HTTPS, RBAC), the CA as
 * its own service account, TokenRequest tokens bound to real pods, CreateCertificate over
 * gRPC+TLS. Every denial must be UNAUTHENTICATED with the generic message; the precise reason
 * is read from the CA's log.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import { FakeClock } from '../support/fake-clock.js';
import type { CaServer } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { caClient, lastDenialReason, startCaEnv, TD, tokenReviews, waitForIndex, type CaClient, type CaEnv, type CertResult } from './support/ca-env.js';
import { newCsr, opensslVerifyChain } from './support/pki-fixtures.js';
import { opensslMissing } from '../support/tools.js';

const clusterClock = new FakeClock(Date.now());
let env: CaEnv;
let ca: CaServer;
let client: CaClient;
let csr: string;
const tokens: Record<string, string> = {};

const id = (ns: string, sa: string) => `spiffe://${TD}/ns/${ns}/sa/${sa}`;

before(async () => {
  env = await startCaEnv({ clusterClock });
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-b', serviceAccount: 'ztunnel', node: 'node-b' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'httpbin-b', serviceAccount: 'httpbin', node: 'node-b' });
  await env.createPod({ namespace: 'default', name: 'both-a', serviceAccount: 'both', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'both-b', serviceAccount: 'both', node: 'node-b' });
  await env.ensureServiceAccount('default', 'nopods');
  ca = await env.startCa();
  client = caClient(ca.port, ca.rootsPem());
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'both-b' }) !== undefined);
  tokens.a = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  tokens.b = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-b' });
  csr = await newCsr();
});

after(async () => {
  client?.close();
  await env?.close();
});

function assertDenied(r: CertResult, reason: string): void {
  assert.equal(r.code, status.UNAUTHENTICATED, `expected UNAUTHENTICATED, got ${JSON.stringify(r).slice(0, 200)}`);
  assert.equal(r.details, 'authentication failed', 'the caller learns nothing more');
  assert.equal(r.errorCode, 'ERR_CA_UNAUTHENTICATED');
  assert.equal(lastDenialReason(env.logs), reason);
}

async function assertIssued(r: CertResult, identity: string): Promise<void> {
  assert.equal(r.code, undefined, `expected a certificate, got ${JSON.stringify(r).slice(0, 300)}`);
  const chain = r.chain!;
  assert.equal(chain.length, 2, 'self-signed CA: leaf, root');
  assert.equal(chain[1], ca.rootsPem());
  assert.equal(checkX509Svid(chain[0]!)?.id, identity);
  assert.match(await opensslVerifyChain(chain), /OK/);
}

test('own identity without impersonation: the caller SA', { skip: opensslMissing() }, async () => {
  await assertIssued(await client.create({ token: tokens.a!, csr }), id('istio-system', 'ztunnel'));
});

test('pod of the requested SA on the same node: issued', { skip: opensslMissing() }, async () => {
  await assertIssued(await client.create({ token: tokens.a!, csr, impersonate: id('default', 'sleep') }), id('default', 'sleep'));
});

test('requested SA with no pod anywhere: denied', async () => {
  assertDenied(await client.create({ token: tokens.a!, csr, impersonate: id('default', 'nopods') }), 'ERR_CA_NO_POD_ON_NODE');
});

test('pod only on another node: denied there, issued to that node', { skip: opensslMissing() }, async () => {
  assertDenied(await client.create({ token: tokens.a!, csr, impersonate: id('default', 'httpbin') }), 'ERR_CA_NO_POD_ON_NODE');
  await assertIssued(await client.create({ token: tokens.b!, csr, impersonate: id('default', 'httpbin') }), id('default', 'httpbin'));
});

test('pods on both nodes: issued to both', { skip: opensslMissing() }, async () => {
  await assertIssued(await client.create({ token: tokens.a!, csr, impersonate: id('default', 'both') }), id('default', 'both'));
  await assertIssued(await client.create({ token: tokens.b!, csr, impersonate: id('default', 'both') }), id('default', 'both'));
});

test('non-SPIFFE or foreign requested identity: denied', async () => {
  for (const bad of ['default/sleep', 'spiffe://other.td/ns/default/sa/sleep', `spiffe://${TD}/sleep`]) {
    assertDenied(await client.create({ token: tokens.a!, csr, impersonate: bad }), 'ERR_CA_IDENTITY_INVALID');
  }
});

test('untrusted caller (a workload SA) cannot impersonate', { skip: opensslMissing() }, async () => {
  const t = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
  assertDenied(await client.create({ token: t, csr, impersonate: id('default', 'both') }), 'ERR_CA_NODE_NOT_TRUSTED');
  // ...but still gets its own identity.
  await assertIssued(await client.create({ token: t, csr }), id('default', 'sleep'));
});

test('trusted list empty: nobody impersonates', async () => {
  const strict = await env.startCa({ trustedNodeAccounts: [] });
  const c = caClient(strict.port, strict.rootsPem());
  try {
    await waitForIndex(strict, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
    assertDenied(await c.create({ token: tokens.a!, csr, impersonate: id('default', 'sleep') }), 'ERR_CA_NODE_NOT_TRUSTED');
  } finally {
    c.close();
  }
});

test('token not bound to a pod: denied for impersonation', async () => {
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel' });
  assertDenied(await client.create({ token: t, csr, impersonate: id('default', 'sleep') }), 'ERR_CA_CALLER_NOT_POD_BOUND');
});

test('token whose bound pod was deleted: the apiserver rejects it', async () => {
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-gone', serviceAccount: 'ztunnel', node: 'node-a' });
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-gone' });
  await env.deletePod('istio-system', 'ztunnel-gone');
  assertDenied(await client.create({ token: t, csr, impersonate: id('default', 'sleep') }), 'ERR_CA_TOKEN_INVALID');
});

test('caller pod missing (review still cached, pod gone from the index): denied', { skip: opensslMissing() }, async () => {
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-m', serviceAccount: 'ztunnel', node: 'node-a' });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-m' }) !== undefined);
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-m' });
  await assertIssued(await client.create({ token: t, csr, impersonate: id('default', 'sleep') }), id('default', 'sleep'));
  await env.deletePod('istio-system', 'ztunnel-m');
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-m' }) === undefined);
  assertDenied(await client.create({ token: t, csr, impersonate: id('default', 'sleep') }), 'ERR_CA_CALLER_POD_MISSING');
});

test('caller pod UID mismatch (pod recreated under the same name): denied', { skip: opensslMissing() }, async () => {
  const { uid: first } = await env.createPod({ namespace: 'istio-system', name: 'ztunnel-u', serviceAccount: 'ztunnel', node: 'node-a' });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-u' }) !== undefined);
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-u' });
  await assertIssued(await client.create({ token: t, csr, impersonate: id('default', 'sleep') }), id('default', 'sleep'));
  await env.deletePod('istio-system', 'ztunnel-u');
  const { uid: second } = await env.createPod({ namespace: 'istio-system', name: 'ztunnel-u', serviceAccount: 'ztunnel', node: 'node-a' });
  assert.notEqual(first, second);
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-u' })?.uid === second);
  assertDenied(await client.create({ token: t, csr, impersonate: id('default', 'sleep') }), 'ERR_CA_CALLER_POD_UID_MISMATCH');
});

test('a failed pod does not count as running on the node', async () => {
  await env.createPod({ namespace: 'default', name: 'failed-a', serviceAccount: 'failedsa', node: 'node-a' });
  await env.core.replaceNamespacedPodStatus({
    namespace: 'default',
    name: 'failed-a',
    body: { ...(await env.core.readNamespacedPod({ namespace: 'default', name: 'failed-a' })), status: { phase: 'Failed' } },
  });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'failed-a' })?.phase === 'Failed');
  assertDenied(await client.create({ token: tokens.a!, csr, impersonate: id('default', 'failedsa') }), 'ERR_CA_NO_POD_ON_NODE');
});

test('wrong audience: denied', async () => {
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a', audiences: ['not-istio-ca'] });
  assertDenied(await client.create({ token: t, csr, impersonate: id('default', 'sleep') }), 'ERR_CA_TOKEN_INVALID');
});

test('tampered signature and alg none: denied', async () => {
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  const [h, p, sig] = t.split('.') as [string, string, string];
  const flipped = sig.slice(0, 10) + (sig[10] === 'A' ? 'B' : 'A') + sig.slice(11);
  assertDenied(await client.create({ token: `${h}.${p}.${flipped}`, csr }), 'ERR_CA_TOKEN_INVALID');
  const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  // Unsigned (empty signature): refused locally as not a JWT, before any TokenReview.
  assertDenied(await client.create({ token: `${none}.${p}.`, csr }), 'ERR_CA_TOKEN_MALFORMED');
});

test('no token and unknown clusterid: denied', { skip: opensslMissing() }, async () => {
  assertDenied(await client.create({ csr }), 'ERR_CA_NO_TOKEN');
  assertDenied(await client.create({ token: tokens.a!, csr, clusterId: 'no-such-cluster' }), 'ERR_CA_UNKNOWN_CLUSTER');
  await assertIssued(await client.create({ token: tokens.a!, csr, clusterId: 'Kubernetes' }), id('istio-system', 'ztunnel'));
});

test('TokenReview failing at the apiserver (500): every call sharing the review gets UNAVAILABLE, nothing cached, the next call is issued', { skip: opensslMissing() }, async () => {
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  const before = tokenReviews(env);
  env.cluster.faults.failWith500(1, { match: { path: '/tokenreviews' } });
  // Eight concurrent calls with one token share one review (as a broker's cold start does).
  const shared = await Promise.all(Array.from({ length: 8 }, () => client.create({ token: t, csr })));
  for (const r of shared) {
    assert.equal(r.code, status.UNAVAILABLE, `an outage is not an authentication refusal: ${JSON.stringify(r).slice(0, 200)}`);
    assert.equal(r.details, 'authentication backend unavailable');
    assert.equal(r.errorCode, 'ERR_CA_AUTHN_BACKEND');
  }
  assert.equal(lastDenialReason(env.logs), 'ERR_CA_AUTHN_BACKEND');
  assert.equal(tokenReviews(env) - before, 1, 'the eight calls shared one review');
  // The failed review was not remembered as a refusal: the next call reviews again and is issued.
  await assertIssued(await client.create({ token: t, csr }), id('istio-system', 'ztunnel'));
  assert.equal(tokenReviews(env) - before, 2);
});

test('TokenReview throttled by the apiserver (429): UNAVAILABLE, then issued', { skip: opensslMissing() }, async () => {
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  env.cluster.faults.failWith429(1, { retryAfterSeconds: 1, match: { path: '/tokenreviews' } });
  const r = await client.create({ token: t, csr });
  assert.equal(r.code, status.UNAVAILABLE, JSON.stringify(r).slice(0, 200));
  await assertIssued(await client.create({ token: t, csr }), id('istio-system', 'ztunnel'));
});

test('expired token: ERR_CA_TOKEN_EXPIRED, refused by its exp without a TokenReview (CA and API server share a clock)', async () => {
  // A second CA on the cluster's clock, so time passes for both as it does in a cluster (its
  // serving certificate is issued before the clock moves, so TLS still verifies).
  const sameClock = await env.startCa({ clock: clusterClock });
  await waitForIndex(sameClock, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-a' }) !== undefined);
  const c = caClient(sameClock.port, sameClock.rootsPem());
  try {
    const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a', expirationSeconds: 600 });
    await clusterClock.advance(601_000);
    const reviews = tokenReviews(env);
    assertDenied(await c.create({ token: t, csr }), 'ERR_CA_TOKEN_EXPIRED');
    assert.equal(tokenReviews(env), reviews, 'no TokenReview for a token expired by its own exp');
    // A CA whose clock is behind the API server's (the first CA here: the cluster's clock has
    // moved 10 minutes, its own has not) still thinks the token valid; all the API server says
    // is "invalid bearer token", so that CA can only report ERR_CA_TOKEN_INVALID.
    assertDenied(await client.create({ token: t, csr }), 'ERR_CA_TOKEN_INVALID');
  } finally {
    c.close();
  }
});

test('denials are counted by reason in /metrics', async () => {
  const text = await ca.metrics.registry.metrics();
  assert.match(text, /certbroker_ca_requests_total\{outcome="denied",reason="ERR_CA_NO_POD_ON_NODE"\} [1-9]/);
  assert.match(text, /certbroker_ca_requests_total\{outcome="issued",reason="ok"\} [1-9]/);
  assert.match(text, /certbroker_ca_token_review_cache_total\{result="hit"\} [1-9]/);
});

test('tokens never reach the log', () => {
  for (const t of Object.values(tokens)) for (const line of env.logs) assert.ok(!line.includes(t.split('.')[2]!), 'token signature found in log');
});
