/**
 * The (node, namespace, account) active-pod counts behind the node check: under seeded random
 * adds and removes (many colliding keys, growth, probe runs shifted back on delete) every count
 * equals a Map's, including keys never added.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NodeAccountCounts } from '../../src/ca/index.js';
import { seededRng } from '../support/seeded-rng.js';

test('counts equal a Map model under random adds and removes, through growth and deletes', () => {
  for (const seed of [1, 2, 3]) {
    const rng = seededRng(seed);
    const counts = new NodeAccountCounts();
    const model = new Map<string, number>();
    const pick = () => [Math.floor(rng() * 300), Math.floor(rng() * 7), Math.floor(rng() * 9)] as const;
    for (let step = 0; step < 40_000; step++) {
      const [n, ns, sa] = pick();
      const k = `${n}/${ns}/${sa}`;
      if (rng() < 0.55) {
        counts.add(n, ns, sa);
        model.set(k, (model.get(k) ?? 0) + 1);
      } else {
        counts.remove(n, ns, sa);
        const c = model.get(k) ?? 0;
        if (c <= 1) model.delete(k);
        else model.set(k, c - 1);
      }
      if (step % 997 === 0) {
        for (let n2 = 0; n2 < 300; n2++) for (let a = 0; a < 7; a++) for (let b = 0; b < 9; b++) {
          assert.equal(counts.count(n2, a, b), model.get(`${n2}/${a}/${b}`) ?? 0, `seed ${seed} step ${step}: ${n2}/${a}/${b}`);
        }
        assert.equal(counts.size, model.size, `seed ${seed} step ${step}: entries`);
      }
    }
    assert.ok(model.size > 1024 * 0.7, 'the table grew past its first capacity');
    for (const k of [...model.keys()]) {
      const [n, ns, sa] = k.split('/').map(Number) as [number, number, number];
      for (let c = model.get(k)!; c > 0; c--) counts.remove(n, ns, sa);
    }
    assert.equal(counts.size, 0, 'empty again');
    assert.equal(counts.count(0, 0, 0), 0);
  }
});
