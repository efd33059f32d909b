/**
 * The pushback a CA shedding load sends (src/ca/overload-hint.ts): about the time its open calls
 * take to drain at the rate it answered calls over the last seconds, between its bounds; the
 * longest when it answered nothing lately. On a fake clock.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_OVERLOAD_HINT, OverloadHint } from '../../src/ca/index.js';
import { FakeClock } from '../support/fake-clock.js';

async function answer(clock: FakeClock, hint: OverloadHint, perSecond: number, seconds: number): Promise<void> {
  for (let s = 0; s < seconds; s++) {
    for (let i = 0; i < perSecond; i++) hint.completed();
    await clock.advance(1000);
  }
}

test('the pushback is the open calls over the recent answer rate, bounded', async () => {
  const clock = new FakeClock();
  const hint = new OverloadHint({ clock });
  assert.equal(hint.retryAfterMs(4096), DEFAULT_OVERLOAD_HINT.maxMs, 'nothing answered yet: the longest');
  await answer(clock, hint, 400, 5);
  assert.equal(hint.ratePerSecond(), 320, 'four whole seconds of 400 in the 5 s window (the current second is empty)');
  assert.equal(hint.retryAfterMs(3200), 10_000, '3200 open at 320/s: 10 s');
  assert.equal(hint.retryAfterMs(10), DEFAULT_OVERLOAD_HINT.minMs, 'never below the minimum');
  assert.equal(hint.retryAfterMs(1_000_000), DEFAULT_OVERLOAD_HINT.maxMs, 'never above the maximum');
});

test('old answers leave the window: a CA that stopped answering asks for the longest wait', async () => {
  const clock = new FakeClock();
  const hint = new OverloadHint({ clock, minMs: 500, maxMs: 20_000, windowSeconds: 3 });
  await answer(clock, hint, 100, 3);
  assert.equal(hint.retryAfterMs(100), 1500, '100 open at 200/3 per second');
  await clock.advance(3000);
  assert.equal(hint.ratePerSecond(), 0);
  assert.equal(hint.retryAfterMs(100), 20_000);
  assert.throws(() => new OverloadHint({ clock, windowSeconds: 0 }), RangeError);
  assert.throws(() => new OverloadHint({ clock, minMs: 10, maxMs: 5 }), RangeError);
});
