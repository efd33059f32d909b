/**
 * What unauthenticated callers cost the API server, counted in the devcluster's request log (its
 * TokenReview POSTs): strings that are not JWTs cost nothing (refused locally, ERR_CA_TOKEN_MALFORMED),
 * a forged JWT repeated costs one TokenReview per refusal-cache TTL (ERR_CA_TOKEN_INVALID), and
 * a good token one per positive-cache TTL. Denials stay the generic UNAUTHENTICATED.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import type { CaServer } from '../../src/ca/index.js';
import { caClient, lastDenialReason, startNodeAScenario, tokenReviews, waitForIndex, type CaClient, type CaEnv } from './support/ca-env.js';
import { newCsr } from './support/pki-fixtures.js';

let env: CaEnv;
let ca: CaServer;
let ztunnel: string;
let client: CaClient;
let csr: string;

before(async () => {
  ({ env, ca, ztunnel } = await startNodeAScenario());
  client = caClient(ca.port, ca.rootsPem());
  csr = await newCsr();
});

after(async () => {
  client?.close();
  await env?.close();
});

async function denied(token: string): Promise<string | undefined> {
  const r = await client.create({ token, csr });
  assert.equal(r.code, status.UNAUTHENTICATED, JSON.stringify(r).slice(0, 200));
  assert.equal(r.details, 'authentication failed');
  return lastDenialReason(env.logs);
}

test('bearer strings that are not JWTs are refused without any TokenReview', async () => {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const [, p] = ztunnel.split('.');
  const garbage = ['garbage', 'x.y.z', 'a'.repeat(6000), `${enc({ alg: 'none' })}.${p}.`, `${ztunnel}.extra`, ztunnel.replace(/\./g, '')];
  const before = tokenReviews(env);
  for (let round = 0; round < 5; round++) {
    for (const g of garbage) assert.equal(await denied(g), 'ERR_CA_TOKEN_MALFORMED');
  }
  assert.equal(tokenReviews(env), before, `${5 * garbage.length} calls, no TokenReview`);
});

test('a forged JWT sent again and again costs one TokenReview (refusal cached by token hash); a good token one per cache TTL', async () => {
  const [h, p, sig] = ztunnel.split('.') as [string, string, string];
  const forged = `${h}.${p}.${sig.slice(0, 10)}${sig[10] === 'A' ? 'B' : 'A'}${sig.slice(11)}`;
  const before = tokenReviews(env);
  for (let i = 0; i < 20; i++) assert.equal(await denied(forged), 'ERR_CA_TOKEN_INVALID');
  assert.equal(tokenReviews(env) - before, 1, 'one review for 20 calls');
  const refused = (await ca.metrics.tokenReviewCache.get()).values.find((v) => v.labels.result === 'refused')?.value;
  assert.equal(refused, 19);

  const good = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
  const beforeGood = tokenReviews(env);
  for (let i = 0; i < 10; i++) assert.equal((await client.create({ token: good, csr })).code, undefined);
  assert.equal(tokenReviews(env) - beforeGood, 1);
});

test('CA_TOKEN_REVIEW_TIMEOUT_SECONDS bounds one TokenReview: with the API server answering after 2 s a 1 s CA answers UNAVAILABLE (ERR_CA_AUTHN_BACKEND), the default 5 s CA issues, and concurrent calls share one review', async () => {
  const short = await env.startCa({ tokenReviewTimeoutMs: 1000 });
  const shortClient = caClient(short.port, short.rootsPem());
  try {
    await waitForIndex(short, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-a' }) !== undefined);
    const first = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const second = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a', expirationSeconds: 7200 });
    env.cluster.faults.setLatency(2000);
    try {
      const r = await shortClient.create({ token: first, csr });
      assert.equal(r.code, status.UNAVAILABLE, JSON.stringify(r).slice(0, 200));
      assert.equal(r.errorCode, 'ERR_CA_AUTHN_BACKEND');
      const before = tokenReviews(env);
      const shared = await Promise.all(Array.from({ length: 8 }, () => client.create({ token: second, csr })));
      for (const s of shared) assert.equal(s.code, undefined, JSON.stringify(s).slice(0, 200));
      assert.equal(tokenReviews(env) - before, 1, 'eight concurrent calls during a slow review: one review');
    } finally {
      env.cluster.faults.setLatency(0);
    }
  } finally {
    shortClient.close();
    await short.stop();
  }
});
