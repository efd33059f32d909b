import { test } from 'node:test';
import assert from 'node:assert/strict';
import { systemClock } from '../../src/core/clock.js';

test('systemClock.sleep honours an already-aborted signal', async () => {
  const ac = new AbortController();
  ac.abort();
  await assert.rejects(systemClock.sleep(10_000, ac.signal));
});

test('systemClock.sleep longer than setTimeout allows (~24.8 days) does not fire early', async () => {
  // Node fires an overflowing setTimeout after 1 ms; a 30-day expiry timer must stay armed.
  const ac = new AbortController();
  let fired = false;
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.name);
  process.on('warning', onWarning);
  try {
    const p = systemClock.sleep(30 * 86_400_000, ac.signal).then(() => (fired = true), () => undefined);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(fired, false);
    ac.abort();
    await p;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(warnings.filter((n) => n === 'TimeoutOverflowWarning'), []);
  } finally {
    process.off('warning', onWarning);
  }
});
