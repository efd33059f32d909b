import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkQueue } from '../../src/core/work-queue.js';
import { silentLogger } from '../../src/core/log.js';
import { FakeClock } from '../support/fake-clock.js';

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
