/**
 * TokenReview and OIDC/JWT configured together (the CA's authenticator chain) against a real
 * devcluster over gRPC+TLS: a definite "not authenticated" from TokenReview is final; only a
 * TokenReview that could not decide (the apiserver failing) lets local JWT verification decide.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import type { CaServer } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { caClient, lastDenialReason, startCaEnv, TD, waitForIndex, type CaClient, type CaEnv } from './support/ca-env.js';
import { newCsr } from './support/pki-fixtures.js';

let env: CaEnv;
let ca: CaServer;
let client: CaClient;
let csr: string;

const id = (ns: string, sa: string) => `spiffe://${TD}/ns/${ns}/sa/${sa}`;

before(async () => {
  env = await startCaEnv();
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  ca = await env.startCa({
    clusters: [
      env.clusterConfig('Kubernetes', {
        tokenReview: true,
        oidc: { issuer: env.cluster.issuer, discoveryUrl: env.cluster.url, caPem: env.cluster.caCertPem, algorithms: ['ES256', 'RS256'], useKubeCredentials: true },
      }),
    ],
  });
  client = caClient(ca.port, ca.rootsPem());
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-a' }) !== undefined);
  csr = await newCsr();
});

after(async () => {
  client?.close();
  await env?.close();
});

test('both configured, bound pod deleted: TokenReview says no and the JWT verifier is not asked', async () => {
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-gone', serviceAccount: 'ztunnel', node: 'node-a' });
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-gone' });
  await env.deletePod('istio-system', 'ztunnel-gone');
  const r = await client.create({ token: t, csr });
  assert.equal(r.code, status.UNAUTHENTICATED, `the caller's own identity must not be issued: ${JSON.stringify(r).slice(0, 200)}`);
  assert.equal(r.details, 'authentication failed');
  assert.equal(lastDenialReason(env.logs), 'ERR_CA_TOKEN_INVALID');
});

test('both configured, wrong audience: denied by TokenReview, not rescued by the JWT verifier', async () => {
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a', audiences: ['not-istio-ca'] });
  const r = await client.create({ token: t, csr });
  assert.equal(r.code, status.UNAUTHENTICATED);
  assert.equal(lastDenialReason(env.logs), 'ERR_CA_TOKEN_INVALID');
});

test('both configured, TokenReview unavailable: the JWT verifier decides (and would refuse a bad token)', async () => {
  const t = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  env.cluster.faults.failWith500(1, { match: { path: '/tokenreviews' } });
  const ok = await client.create({ token: t, csr });
  assert.equal(ok.code, undefined, JSON.stringify(ok).slice(0, 200));
  assert.equal(checkX509Svid(ok.chain![0]!)?.id, id('istio-system', 'ztunnel'));

  const [h, p, sig] = t.split('.') as [string, string, string];
  const tampered = `${h}.${p}.${sig.slice(0, 10)}${sig[10] === 'A' ? 'B' : 'A'}${sig.slice(11)}`;
  env.cluster.faults.failWith500(1, { match: { path: '/tokenreviews' } });
  const bad = await client.create({ token: tampered, csr });
  assert.equal(bad.code, status.UNAUTHENTICATED);
  assert.equal(lastDenialReason(env.logs), 'ERR_CA_TOKEN_INVALID');
});
