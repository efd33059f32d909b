import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoff, backoffCeiling, DEFAULT_REFRESH_POLICY, KeyedPriorityQueue, refreshAt, refreshDelay, retryDelay } from '../../src/broker/index.js';
import { seededRng } from '../support/seeded-rng.js';

const almostOne = () => 0.999_999;

describe('refreshAt', () => {
  const cert = { notBefore: 1_000_000, notAfter: 1_000_000 + 3_600_000 };
  it('is the half-life with a centred rng', () => {
    assert.equal(refreshAt(cert, () => 0.5), 1_000_000 + 1_800_000);
  });
  it('stays within ±10 % of the half-life at the rng boundaries', () => {
    assert.equal(refreshAt(cert, () => 0), 1_000_000 + 1_620_000);
    const high = refreshAt(cert, almostOne);
    assert.ok(high < 1_000_000 + 1_980_000 && high > 1_000_000 + 1_979_999, String(high));
  });
  it('measures from notBefore, so a backdated certificate refreshes earlier', () => {
    const backdated = { notBefore: 0, notAfter: 600_000 };
    assert.equal(refreshAt(backdated, () => 0.5), 300_000);
  });
});

describe('refreshDelay', () => {
  const cert = { notBefore: 0, notAfter: 3_600_000 };
  it('waits until the half-life', () => {
    assert.equal(refreshDelay(cert, 600_000, () => 0.5), 1_200_000);
  });
  it('with a clock ahead of the CA (half-life already past) refreshes at half of what is left, not at once', () => {
    assert.equal(refreshDelay(cert, 2_400_000, () => 0.5), 600_000);
    assert.equal(refreshDelay(cert, 3_599_900, () => 0.5), 1_000, 'floored');
    assert.equal(refreshDelay(cert, 4_000_000, () => 0.5), 1_000, 'expired');
  });
});

describe('backoff', () => {
  it('starts at 500 ms and doubles', () => {
    assert.deepEqual(
      [0, 1, 2, 3].map((n) => backoff(n, () => 0.5)),
      [500, 1000, 2000, 4000],
    );
  });
  it('spreads ±20 %', () => {
    assert.equal(backoff(0, () => 0), 400);
    const high = backoff(0, almostOne);
    assert.ok(high > 599.99 && high < 600, String(high));
  });
  it('never exceeds 150 s, jitter included, even for huge attempt counts', () => {
    const top = backoff(30, almostOne);
    assert.ok(top > 149_999 && top <= 150_000, String(top));
    assert.equal(backoff(1_000, () => 0), 120_000);
    assert.equal(backoff(8, () => 0), 102_400);
    assert.equal(backoff(9, () => 0.5), 135_000, 'at the ceiling a centred draw is the middle of the 20 % below it');
  });
  it('at the ceiling the delays spread over the 20 % below it instead of piling on the ceiling (a fleet in step)', () => {
    const rng = seededRng(7);
    for (const ceiling of [5_000, 150_000]) {
      const delays = Array.from({ length: 1_000 }, () => backoff(12, rng, { ...DEFAULT_REFRESH_POLICY, backoffMaxMs: ceiling }));
      const onCeiling = delays.filter((d) => d === ceiling).length;
      assert.ok(onCeiling <= 5, `${onCeiling} of 1000 retries exactly on the ${ceiling} ms ceiling (a capped ±20 % puts half there)`);
      assert.ok(delays.every((d) => d >= 0.8 * ceiling && d <= ceiling));
      // Spread: every tenth of the band [0.8, 1.0] x ceiling gets some.
      const deciles = new Set(delays.map((d) => Math.min(9, Math.floor(((d / ceiling - 0.8) / 0.2) * 10))));
      assert.equal(deciles.size, 10);
    }
  });
});

describe('retryDelay: retries follow the certificate still held', () => {
  const HOUR = 3_600_000;
  it('the ceiling is 150 s far from expiry, a quarter of the time left when nearer, 5 s with nothing valid', () => {
    const held = { notBefore: 0, notAfter: 24 * HOUR };
    assert.equal(backoffCeiling(held, 12 * HOUR), 150_000);
    assert.equal(backoffCeiling(held, 24 * HOUR - 200_000), 50_000);
    assert.equal(backoffCeiling(held, 24 * HOUR - 10_000), 5_000, 'never below the urgent ceiling');
    assert.equal(backoffCeiling(held, 24 * HOUR), 5_000, 'expired');
    assert.equal(backoffCeiling(undefined, 0), 5_000, 'missing');
  });
  it('never waits past notAfter', () => {
    const held = { notBefore: 0, notAfter: 100_000 };
    assert.equal(retryDelay(3, held, 97_000, () => 0.5), 3_000, '4 s backoff cut at expiry');
    assert.equal(retryDelay(0, held, 10_000, () => 0.5), 500, 'short backoffs are left alone');
  });
  it('keeps exponential growth under each ceiling, jitter included', () => {
    assert.ok(retryDelay(30, undefined, 0, () => 0.999_999) <= 5_000);
    assert.ok(retryDelay(30, undefined, 0, () => 0.999_999) > 4_999);
    assert.ok(retryDelay(30, { notBefore: 0, notAfter: 24 * HOUR }, 12 * HOUR, () => 0.999_999) > 149_999);
    assert.equal(retryDelay(2, undefined, 0, () => 0.5), 2_000);
  });

  it('the schedule of a refresh that keeps failing: an attempt at expiry at the latest, then one every <= 5 s', () => {
    // A 24 h certificate whose refresh (at half-life) fails from then on, for 6 hours past expiry.
    for (const seed of [1, 2, 3, 42]) {
      const rng = seededRng(seed);
      const held = { notBefore: 0, notAfter: 24 * HOUR };
      let now = 12 * HOUR;
      const attempts: number[] = [now];
      const gaps: Array<{ from: number; gap: number }> = [];
      for (let n = 0; now < 30 * HOUR; n++) {
        const gap = retryDelay(n, held, now, rng);
        gaps.push({ from: now, gap });
        now += gap;
        attempts.push(now);
      }
      assert.ok(attempts.includes(held.notAfter) || attempts.some((t) => t > held.notAfter - 5_000 && t <= held.notAfter), `seed ${seed}: a try close to expiry`);
      for (const { from, gap } of gaps) {
        assert.ok(from >= held.notAfter || from + gap <= held.notAfter, `seed ${seed}: a retry crossed notAfter (from ${from})`);
        const ceiling = backoffCeiling(held, from);
        assert.ok(gap <= ceiling, `seed ${seed}: gap ${gap} over ceiling ${ceiling}`);
        if (from >= held.notAfter) assert.ok(gap <= 5_000, `seed ${seed}: gap ${gap} after expiry`);
      }
      // The ceiling really shrinks: within the last 2 minutes no gap exceeds 30 s.
      assert.ok(gaps.filter((g) => g.from > held.notAfter - 120_000 && g.from < held.notAfter).every((g) => g.gap <= 30_000));
    }
  });
});

describe('KeyedPriorityQueue', () => {
  it('orders by priority, FIFO within a priority, upgrades but never downgrades', () => {
    const q = new KeyedPriorityQueue<string>();
    q.push('a', 'background');
    q.push('b', 'warmup');
    q.push('c', 'background');
    q.push('d', 'warmup');
    assert.equal(q.push('c', 'realtime'), true);
    assert.equal(q.push('b', 'background'), false, 'no downgrade');
    assert.equal(q.size, 4);
    assert.equal(q.priorityOf('c'), 'realtime');
    const out: string[] = [];
    for (let k = q.pop(); k !== undefined; k = q.pop()) out.push(k);
    assert.deepEqual(out, ['c', 'b', 'd', 'a']);
  });
  it('skips deleted keys', () => {
    const q = new KeyedPriorityQueue<string>();
    q.push('a', 'warmup');
    q.push('b', 'warmup');
    q.delete('a');
    assert.equal(q.pop(), 'b');
    assert.equal(q.pop(), undefined);
    assert.equal(q.size, 0);
  });
});
