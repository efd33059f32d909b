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

test('counts equal a Map model under random adds and removes, through growth and deletes', () => {
  for (const seed of [1, 2, 3]) {
    const rng = seededRng(seed);
    const counts = new NodeAccountCounts();
    const model = new Map<string, number>();
    let most = 0;
    for (let step = 0; step < 40_000; step++) {
      const n = Math.floor(rng() * NODES);
      // Low nodes get many accounts (tables grow several times), the rest few.
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
