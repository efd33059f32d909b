/**
 * The CA's per-call metric updates are tallied and handed to prom-client when a metric is read
 * (src/ca/metrics.ts): what a scrape or `get()` shows must be exactly what was counted — nothing
 * lost, nothing counted twice across reads, the series present at 0 where they were before.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CaMetrics } from '../../src/ca/index.js';

async function requestsValue(m: CaMetrics, outcome: string, reason: string): Promise<number | undefined> {
  return (await m.requests.get()).values.find((v) => v.labels.outcome === outcome && v.labels.reason === reason)?.value;
}

test('issued/ok: tallied counts and direct incs add up, once, on every read', async () => {
  const m = new CaMetrics();
  assert.equal(await requestsValue(m, 'issued', 'ok'), undefined, 'no issued series before the first certificate, as before');
  for (let i = 0; i < 3; i++) m.issuedOk.inc();
  m.requests.inc({ outcome: 'issued', reason: 'ok' });
  m.requests.inc({ outcome: 'invalid_argument', reason: 'ERR_CA_CSR_INVALID' });
  assert.equal(await requestsValue(m, 'issued', 'ok'), 4);
  assert.equal(await requestsValue(m, 'issued', 'ok'), 4, 'a second read counts nothing twice');
  m.issuedOk.inc();
  assert.match(await m.registry.metrics(), /^certbroker_ca_requests_total\{outcome="issued",reason="ok"\} 5$/mu);
  assert.equal(await requestsValue(m, 'invalid_argument', 'ERR_CA_CSR_INVALID'), 1);
});

test('token cache hit: at 0 before any lookup, then the tallied hits', async () => {
  const m = new CaMetrics();
  const hits = async () => (await m.tokenReviewCache.get()).values.find((v) => v.labels.result === 'hit')?.value;
  assert.equal(await hits(), 0);
  m.cacheHit.inc();
  m.cacheHit.inc();
  assert.equal(await hits(), 2);
  assert.match(await m.registry.metrics(), /^certbroker_ca_token_review_cache_total\{result="hit"\} 2$/mu);
});

test('signing time: every observation reaches the histogram, past the buffer and across reads', async () => {
  const m = new CaMetrics();
  let sum = 0;
  const read = async () => {
    const text = await m.registry.metrics();
    const num = (re: RegExp) => Number(re.exec(text)?.[1]);
    return {
      count: num(/^certbroker_ca_signing_duration_seconds_count (\S+)$/mu),
      sum: num(/^certbroker_ca_signing_duration_seconds_sum (\S+)$/mu),
      under1ms: num(/^certbroker_ca_signing_duration_seconds_bucket\{le="0.001"\} (\S+)$/mu),
    };
  };
  for (let i = 0; i < 2500; i++) {
    const s = i % 2 === 0 ? 0.0004 : 0.003;
    m.signingSeconds.observe(s);
    sum += s;
  }
  let r = await read();
  assert.equal(r.count, 2500);
  assert.ok(Math.abs(r.sum - sum) < 1e-9);
  assert.equal(r.under1ms, 1250);
  m.signingSeconds.observe(0.0004);
  r = await read();
  assert.equal(r.count, 2501, 'nothing observed twice across reads');
  assert.equal(r.under1ms, 1251);
});
