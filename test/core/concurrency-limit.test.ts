import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConcurrencyLimit } from '../../src/core/concurrency-limit.js';
import { flushMicrotasks } from '../support/fake-clock.js';

test('at most max tasks run at once; the others start in arrival order as running ones settle, failures included', async () => {
  const limit = new ConcurrencyLimit(2);
  const started: number[] = [];
  const finish = new Map<number, { ok: () => void; fail: () => void }>();
  const results = Array.from({ length: 5 }, (_, i) =>
    limit
      .run(
        () =>
          new Promise<number>((resolve, reject) => {
            started.push(i);
            finish.set(i, { ok: () => resolve(i), fail: () => reject(new Error(`task ${i}`)) });
          }),
      )
      .then((v) => `ok ${v}`, (e: Error) => e.message),
  );
  await flushMicrotasks();
  assert.deepEqual(started, [0, 1]);
  assert.deepEqual([limit.running, limit.queued], [2, 3]);
  finish.get(1)!.fail();
  await flushMicrotasks();
  assert.deepEqual(started, [0, 1, 2], 'a failed task frees its slot');
  finish.get(0)!.ok();
  finish.get(2)!.ok();
  await flushMicrotasks();
  assert.deepEqual(started, [0, 1, 2, 3, 4]);
  finish.get(3)!.ok();
  finish.get(4)!.ok();
  assert.deepEqual(await Promise.all(results), ['ok 0', 'task 1', 'ok 2', 'ok 3', 'ok 4']);
  assert.deepEqual([limit.running, limit.queued], [0, 0]);
  assert.throws(() => new ConcurrencyLimit(0), RangeError);
});
