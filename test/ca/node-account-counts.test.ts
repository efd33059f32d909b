/**
 * The per-node active-pod counts behind the node check: under seeded random adds and removes
 * (many colliding accounts per node, tables that grow, probe runs shifted back on delete) every
 * count equals a Map's, including pairs never added.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NodeAccountCounts } from '../../src/ca/index.js';
import { seededRng } from '../support/seeded-rng.js';

const NODES = 120;
const ACCOUNTS = 60;

/** One random add or remove, on `counts` and on the model: low nodes get many accounts (tables grow several times), the rest few. */
function randomStep(rng: () => number, counts: NodeAccountCounts, model: Map<string, number>): void {
  const n = Math.floor(rng() * NODES);
  const a = Math.floor(rng() * (n < 10 ? ACCOUNTS : 6));
  const k = `${n}/${a}`;
  if (rng() < 0.55) {
    counts.add(n, a);
    model.set(k, (model.get(k) ?? 0) + 1);
  } else {
    counts.remove(n, a);
    const c = model.get(k) ?? 0;
    if (c <= 1) model.delete(k);
    else model.set(k, c - 1);
  }
}

test('counts equal a Map model under random adds and removes, through growth and deletes', () => {
  for (const seed of [1, 2, 3]) {
    const rng = seededRng(seed);
    const counts = new NodeAccountCounts();
    const model = new Map<string, number>();
    let most = 0;
    for (let step = 0; step < 40_000; step++) {
      randomStep(rng, counts, model);
      if (step % 997 === 0) {
        for (let n2 = 0; n2 < NODES + 2; n2++) for (let a2 = 0; a2 < ACCOUNTS + 2; a2++) {
          assert.equal(counts.count(n2, a2), model.get(`${n2}/${a2}`) ?? 0, `seed ${seed} step ${step}: ${n2}/${a2}`);
        }
        assert.equal(counts.size, model.size, `seed ${seed} step ${step}: entries`);
        for (let n2 = 0; n2 < 10; n2++) most = Math.max(most, [...model.keys()].filter((key) => key.startsWith(`${n2}/`)).length);
      }
    }
    assert.ok(most > 40, `a node's table grew well past its first 8 entries (${most})`);
    for (const k of [...model.keys()]) {
      const [n, a] = k.split('/').map(Number) as [number, number];
      for (let c = model.get(k)!; c > 0; c--) counts.remove(n, a);
    }
    assert.equal(counts.size, 0, 'empty again');
    assert.equal(counts.count(0, 0), 0);
    counts.remove(NODES + 5, 3);
    assert.equal(counts.count(NODES + 5, 3), 0, 'a node never seen');
  }
});

test('a kept table place answers like count() until a move of its watched node is announced (growth and repacks)', () => {
  for (const seed of [4, 5]) {
    const rng = seededRng(seed);
    let announced = 0;
    const counts = new NodeAccountCounts(() => announced++);
    const model = new Map<string, number>();
    // What a note keeps per node: the place, valid from the last announcement on (every node watched).
    const kept: Array<{ base: number; entries: number }> = [];
    const keepAll = () => {
      for (let n = 0; n < NODES; n++) {
        counts.watch(n);
        kept[n] = { base: counts.tableBase(n), entries: counts.tableEntries(n) };
      }
    };
    keepAll();
    let seen = 0;
    let checks = 0;
    for (let step = 0; step < 20_000; step++) {
      randomStep(rng, counts, model);
      if (announced !== seen) {
        seen = announced;
        keepAll();
      }
      // A few probes through kept places after every step: a move that was not announced shows as a stale answer.
      for (let p = 0; p < 4; p++) {
        const n2 = Math.floor(rng() * NODES);
        const a2 = Math.floor(rng() * ACCOUNTS);
        assert.equal(counts.countIn(kept[n2]!.base, kept[n2]!.entries, a2), model.get(`${n2}/${a2}`) ?? 0, `seed ${seed} step ${step}: ${n2}/${a2} through its kept place`);
        checks++;
      }
    }
    assert.ok(announced > 20, `tables moved and were announced (${announced})`);
    assert.ok(checks > 0);
  }
});

test('a move is announced once per watch, for watched nodes only; a repack spends every mark', () => {
  let announced = 0;
  const counts = new NodeAccountCounts(() => announced++);
  counts.add(1, 0);
  // Node 1 grows (8 -> 16 entries at its fifth account) without a watch: nothing to say.
  for (let a = 1; a < 5; a++) counts.add(1, a);
  assert.equal(announced, 0);
  counts.watch(1);
  counts.watch(1);
  counts.watch(-1);
  // Its first table for node 2 (unwatched) and growth elsewhere: still nothing.
  counts.add(2, 0);
  assert.equal(announced, 0);
  // Node 1 grows again (16 -> 32 at its tenth account): once.
  for (let a = 5; a < 10; a++) counts.add(1, a);
  assert.equal(announced, 1);
  for (let a = 10; a < 20; a++) counts.add(1, a);
  assert.equal(announced, 1, 'the mark was spent by the first move');
  // A node watched before its first table is placed hears of the placing.
  counts.watch(7);
  counts.add(7, 3);
  assert.equal(announced, 2);
  assert.equal(counts.countIn(counts.tableBase(7), counts.tableEntries(7), 3), 1);
  assert.equal(counts.countIn(0, 0, 3), 0, 'no table: nothing active');
  // Filling the pool forces a repack: one announcement for all marked nodes.
  counts.watch(1);
  counts.watch(7);
  const before = announced;
  for (let n = 10; n < 200; n++) for (let a = 0; a < 6; a++) counts.add(n, a);
  assert.equal(announced, before + 1);
  assert.equal(counts.count(1, 19), 1);
  assert.equal(counts.countIn(counts.tableBase(1), counts.tableEntries(1), 19), 1);
});
