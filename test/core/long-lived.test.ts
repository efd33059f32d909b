/**
 * The shared lifecycle shape (src/core/long-lived.ts): a stop waits for the part at most its
 * deadline, and an aborted start signal stops the part exactly once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { settleWithin, stopOnAbort } from '../../src/core/long-lived.js';

test('settleWithin: true once the work settles (resolved or rejected), false when the deadline comes first', async () => {
  assert.equal(await settleWithin(Promise.resolve('done'), 10_000), true);
  assert.equal(await settleWithin(Promise.reject(new Error('failed stop')), 10_000), true, 'a stop never rejects');
  assert.equal(await settleWithin(new Promise(() => undefined), 5), false, 'a hung part does not hold the stop');
});

test('stopOnAbort: stop runs once, synchronously on abort; at once for an aborted signal; never after dispose', () => {
  const ac = new AbortController();
  let stops = 0;
  stopOnAbort(ac.signal, () => void stops++);
  assert.equal(stops, 0);
  ac.abort();
  ac.abort();
  assert.equal(stops, 1, 'once, before abort() returns');

  let early = 0;
  stopOnAbort(ac.signal, () => void early++);
  assert.equal(early, 1, 'an already aborted signal stops at once');

  const later = new AbortController();
  let disposed = 0;
  const dispose = stopOnAbort(later.signal, () => void disposed++);
  dispose();
  later.abort();
  assert.equal(disposed, 0);

  assert.doesNotThrow(() => stopOnAbort(undefined, () => assert.fail('no signal, no stop'))());
});

test('stopOnAbort drops a throwing or rejecting stop (the part reports its own failures)', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  try {
    const ac = new AbortController();
    stopOnAbort(ac.signal, () => {
      throw new Error('sync throw');
    });
    stopOnAbort(ac.signal, () => Promise.reject(new Error('rejected')));
    assert.doesNotThrow(() => ac.abort());
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
