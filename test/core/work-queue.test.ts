import { test } from 'node:test';
import assert from 'node:assert/strict';
import { backoffDelayMs, WorkQueue, type WorkOutcome } from '../../src/core/work-queue.js';
import { silentLogger } from '../../src/core/log.js';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';

function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => (open = r));
  return { promise, open };
}

test('a key is queued once however often it is added, and one added while in progress runs once more afterwards', async () => {
  const seen: string[] = [];
  const hold = gate();
  const q = new WorkQueue<string>({
    clock: new FakeClock(),
    rng: () => 0.5,
    logger: silentLogger,
    process: async (k) => {
      seen.push(k);
      if (seen.length === 1) await hold.promise;
    },
  });
  q.add('a');
  q.add('b');
  q.add('b');
  q.add('a'); // 'a' is in progress: once more after it
  assert.equal(q.length, 1, 'b once');
  hold.open();
  await q.idle();
  assert.deepEqual(seen, ['a', 'b', 'a']);
});

test('a failing key is retried with jittered exponential backoff on the clock, and its count resets on success', async () => {
  const clock = new FakeClock();
  let fail = 3;
  const attempts: number[] = [];
  const q = new WorkQueue<string>({
    clock,
    rng: () => 0.5, // no jitter
    logger: silentLogger,
    initialBackoffMs: 100,
    maxBackoffMs: 250,
    process: async () => {
      attempts.push(clock.now());
      if (fail-- > 0) throw new Error('refused');
    },
  });
  const t0 = clock.now();
  q.add('k');
  await q.idle();
  assert.equal(q.failures('k'), 1);
  for (const wait of [100, 200, 250]) {
    await clock.waitForTimers(1);
    await clock.advance(wait);
    await q.idle();
  }
  assert.deepEqual(attempts.map((t) => t - t0), [0, 100, 300, 550]);
  assert.equal(q.failures('k'), 0);
  assert.equal(clock.pendingTimers, 0, 'no retry left armed');
});

test('stop drops queued keys and pending retries', async () => {
  const clock = new FakeClock();
  const seen: string[] = [];
  const q = new WorkQueue<string>({ clock, rng: () => 0.5, logger: silentLogger, process: async (k) => {
    seen.push(k);
    throw new Error('no');
  } });
  q.add('x');
  await q.idle();
  await clock.waitForTimers(1);
  await q.stop();
  assert.equal(clock.pendingTimers, 0);
  q.add('y');
  await clock.advance(60_000);
  assert.deepEqual(seen, ['x']);
});

test('the retry delay doubles, is jittered ±20 % and never longer than the cap', () => {
  const o = { initialMs: 500, maxMs: 30_000 };
  assert.equal(backoffDelayMs(1, { ...o, rng: () => 0.5 }), 500);
  assert.equal(backoffDelayMs(3, { ...o, rng: () => 0.5 }), 2000);
  assert.equal(backoffDelayMs(1, { ...o, rng: () => 0 }), 400);
  assert.equal(backoffDelayMs(20, { ...o, rng: () => 0.99 }), 30_000);
});

// The CNI repair controller's use: a bounded number of attempts, then the key is given up.
test('with maxAttempts: failures retry with backoff, then give up; a fresh add starts over', async () => {
  const clock = new FakeClock();
  const calls: string[] = [];
  const gaveUp: Array<[string, number]> = [];
  let failA = true;
  const q = new WorkQueue<string>({
    clock,
    rng: () => 0.5,
    logger: silentLogger,
    maxAttempts: 3,
    initialBackoffMs: 100,
    maxBackoffMs: 10_000,
    process: async (key) => {
      calls.push(key);
      if (key === 'a' && failA) throw new Error('api down');
      if (key === 'b') throw new Error('always');
    },
    onGiveUp: (key, _err, attempts) => gaveUp.push([key, attempts]),
  });
  q.add('a');
  q.add('b');
  q.add('b');
  await flushMicrotasks();
  assert.deepStrictEqual(calls, ['a', 'b']);
  await clock.waitForTimers(2);
  assert.equal(clock.nextDue! - clock.now(), 100, 'first retry after the initial delay');
  await clock.advance(100);
  assert.deepStrictEqual(calls, ['a', 'b', 'a', 'b']);
  failA = false;
  await clock.advance(200);
  assert.deepStrictEqual(calls, ['a', 'b', 'a', 'b', 'a', 'b']);
  assert.deepStrictEqual(gaveUp, [['b', 3]], 'b gave up after 3 attempts, a succeeded on its third');
  await clock.advance(10_000);
  assert.equal(calls.length, 6, 'nothing more is retried');
  q.add('b');
  await flushMicrotasks();
  assert.equal(calls.length, 7);
  await q.stop();
});

test('a key failing again while its retry is armed gets no second retry', async () => {
  const clock = new FakeClock();
  const calls: string[] = [];
  const q = new WorkQueue<string>({ clock, rng: () => 0.5, logger: silentLogger, initialBackoffMs: 100, process: async (k) => {
    calls.push(k);
    throw new Error('no');
  } });
  q.add('k');
  await q.idle();
  await clock.waitForTimers(1);
  q.add('k'); // an update while the retry waits
  await q.idle();
  assert.equal(clock.pendingTimers, 1, 'still the one retry');
  await clock.advance(100);
  await q.idle();
  assert.deepEqual(calls, ['k', 'k', 'k']);
  await q.stop();
});

// The k8s-signer controllers' use: several workers, handlers that answer "retry, because ...".
test('workers: one run per key at a time, retry outcomes back off on the clock, stop waits', async () => {
  const clock = new FakeClock();
  const runs: string[] = [];
  const retries: Array<[string, number]> = [];
  let release: (() => void) | undefined;
  let answers: WorkOutcome[] = [{ retry: 'ca-not-ready' }, { retry: 'conflict' }, undefined];
  const queue = new WorkQueue<string>({
    workers: 2, initialBackoffMs: 500, maxBackoffMs: 30_000, clock, rng: () => 0.5, logger: silentLogger, what: 'pcr',
    process: async (key) => {
      runs.push(key);
      if (key === 'slow') await new Promise<void>((r) => (release = r));
      return key === 'flaky' ? answers.shift() : undefined;
    },
    onRetry: (_k, why, delay) => retries.push([why, delay]),
  });
  queue.add('slow');
  queue.add('slow');
  await flushMicrotasks();
  assert.deepEqual(runs, ['slow'], 'a key queued while it runs waits for that run');
  release!();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(runs, ['slow', 'slow']);
  release!();
  queue.add('flaky');
  await clock.waitForTimers(1);
  assert.deepEqual(retries, [['ca-not-ready', 500]]);
  clock.advance(500);
  await clock.waitForTimers(1);
  assert.deepEqual(retries.map(([, d]) => d), [500, 1000], 'the delay doubles');
  clock.advance(1000);
  await new Promise((r) => setImmediate(r));
  assert.equal(runs.filter((r) => r === 'flaky').length, 3);
  assert.equal(queue.failures('flaky'), 0, 'a success resets the count');
  answers = [{ retry: 'again' }];
  queue.add('flaky');
  await clock.waitForTimers(1);
  assert.deepEqual(retries.map(([, d]) => d), [500, 1000, 500], 'a success resets the backoff');
  queue.forget('flaky');
  assert.equal(queue.failures('flaky'), 0, 'forget drops the count');
  await queue.stop();
  assert.equal(queue.signal.aborted, true);
  clock.advance(10_000);
  queue.add('late');
  await new Promise((r) => setImmediate(r));
  assert.equal(runs.includes('late'), false, 'a stopped queue takes no work');
});
