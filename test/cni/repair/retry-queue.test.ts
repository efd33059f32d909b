import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock, flushMicrotasks } from '../../support/fake-clock.js';
import { RetryQueue, retryDelayMs } from '../../../src/cni/repair/index.js';

test('retry delay doubles, is jittered ±20 % and capped', () => {
  const o = { baseDelayMs: 500, maxDelayMs: 30_000 };
  assert.equal(retryDelayMs(1, { ...o, rng: () => 0.5 }), 500);
  assert.equal(retryDelayMs(3, { ...o, rng: () => 0.5 }), 2000);
  assert.equal(retryDelayMs(1, { ...o, rng: () => 0 }), 400);
  assert.equal(retryDelayMs(20, { ...o, rng: () => 0.99 }), 30_000);
});

test('a key queued twice is handled once; failures retry with backoff, then give up', async () => {
  const clock = new FakeClock();
  const calls: string[] = [];
  const gaveUp: Array<[string, number]> = [];
  let failA = true;
  const q = new RetryQueue({
    clock,
    rng: () => 0.5,
    maxAttempts: 3,
    baseDelayMs: 100,
    maxDelayMs: 10_000,
    handle: async (key) => {
      calls.push(key);
      if (key === 'a' && failA) throw new Error('api down');
      if (key === 'b') throw new Error('always');
    },
    onGiveUp: (key, _err, attempts) => gaveUp.push([key, attempts]),
  });
  const stop = new AbortController();
  const running = q.run(stop.signal);
  q.add('a');
  q.add('a');
  q.add('b');
  await flushMicrotasks();
  assert.deepStrictEqual(calls, ['a', 'b']);
  await clock.waitForTimers(2);
  assert.equal(clock.nextDue! - clock.now(), 100, 'first retry after the base delay');
  await clock.advance(100);
  assert.deepStrictEqual(calls, ['a', 'b', 'a', 'b']);
  failA = false;
  await clock.advance(200);
  assert.deepStrictEqual(calls, ['a', 'b', 'a', 'b', 'a', 'b']);
  assert.deepStrictEqual(gaveUp, [['b', 3]], 'b gave up after 3 attempts, a succeeded on its third');
  await clock.advance(10_000);
  assert.equal(calls.length, 6, 'nothing more is retried');
  // A fresh add after a give-up starts over.
  q.add('b');
  await flushMicrotasks();
  assert.equal(calls.length, 7);
  stop.abort();
  await running;
});
