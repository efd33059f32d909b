import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from './fake-clock.js';

test('FakeClock fires sleeps in deadline order only when advanced', async () => {
  const clock = new FakeClock(1_000);
  const fired: string[] = [];
  void clock.sleep(200).then(() => fired.push('b'));
  void clock.sleep(100).then(() => fired.push('a'));
  await clock.waitForTimers(2);
  assert.equal(clock.pendingTimers, 2);
  assert.equal(clock.nextDue, 1_100);
  await clock.advance(99);
  assert.deepEqual(fired, []);
  await clock.advance(1);
  assert.deepEqual(fired, ['a']);
  assert.equal(clock.now(), 1_100);
  await clock.advance(500);
  assert.deepEqual(fired, ['a', 'b']);
  assert.equal(clock.now(), 1_600);
});

test('FakeClock sleeps armed during advance fire within the same advance when due', async () => {
  const clock = new FakeClock(0);
  const times: number[] = [];
  const loop = async () => {
    for (let i = 0; i < 3; i++) {
      await clock.sleep(10);
      times.push(clock.now());
    }
  };
  const done = loop();
  await clock.waitForTimers(1);
  await clock.advance(25);
  assert.deepEqual(times, [10, 20]);
  await clock.advance(5);
  await done;
  assert.deepEqual(times, [10, 20, 30]);
});

test('FakeClock sleep rejects on abort and leaves no timer behind', async () => {
  const clock = new FakeClock(0);
  const ac = new AbortController();
  const p = clock.sleep(1_000, ac.signal);
  await clock.waitForTimers(1);
  ac.abort();
  await assert.rejects(p);
  assert.equal(clock.pendingTimers, 0);
});

test('waitForTimers resolves only once the timer is armed', async () => {
  const clock = new FakeClock(0);
  let armed = false;
  const waiting = clock.waitForTimers(1).then(() => assert.ok(armed));
  armed = true;
  void clock.sleep(5);
  await waiting;
});

test('waitForTimers rejects after its timeout when the timer is never armed, naming the counts', async () => {
  const clock = new FakeClock(0);
  void clock.sleep(5);
  await assert.rejects(clock.waitForTimers(2, { timeoutMs: 30 }), {
    message: 'waited 30 ms for 2 armed timers, have 1',
  });
  // The timed-out waiter is gone: arming the second timer later resolves only new waiters.
  void clock.sleep(5);
  await clock.waitForTimers(2, { timeoutMs: 30 });
  assert.equal(clock.pendingTimers, 2);
});

test('waitForTimers that lost a race ends on its signal: no timer left, no unhandled rejection', async () => {
  const clock = new FakeClock(0);
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const lost = new AbortController();
    const waiter = clock.waitForTimers(1, { signal: lost.signal });
    assert.equal(await Promise.race([waiter.then(() => 'waiter'), Promise.resolve('outcome')]), 'outcome');
    lost.abort();
    await assert.rejects(waiter, { name: 'AbortError' });
    // A later sleep has no stale waiter to resolve, and the waiter's timeout timer is gone (the
    // test process would otherwise stay alive for DEFAULT_WAIT_FOR_TIMERS_MS after this test).
    void clock.sleep(5);
    // An unawaited waiter that times out is not an unhandled rejection.
    void clock.waitForTimers(2, { timeoutMs: 10 });
    await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
