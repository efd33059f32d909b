/**
 * CoalescedRun (behind the CA's serving-certificate renewals and cacerts re-reads): calls during
 * a run join it and cost one more run, not one each; no re-run once stopped.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CoalescedRun } from '../../src/core/coalesced-run.js';

function gatedTask() {
  const gates: Array<() => void> = [];
  let runs = 0;
  const task = () => {
    runs++;
    return new Promise<void>((resolve) => gates.push(resolve));
  };
  const release = async () => {
    while (gates.length === 0) await new Promise((r) => setImmediate(r));
    gates.shift()!();
  };
  return { task, release, runs: () => runs };
}

test('coalesced run: calls during a run join it, and the task runs once more after it', async () => {
  const t = gatedTask();
  const r = new CoalescedRun(t.task);
  const first = r.run();
  const joined = [r.run(), r.run(), r.run()];
  assert.equal(joined[0], first, 'a call during a run gets the run in progress');
  assert.equal(t.runs(), 1);
  await t.release();
  await t.release();
  await Promise.all([first, ...joined]);
  assert.equal(t.runs(), 2, 'three calls during the run cost one re-run');
  assert.equal(r.running, undefined);
});

test('coalesced run: no re-run once stopped', async () => {
  const t = gatedTask();
  let stopped = false;
  const r = new CoalescedRun(t.task, () => stopped);
  const first = r.run();
  void r.run();
  stopped = true;
  await t.release();
  await first;
  assert.equal(t.runs(), 1);
});
