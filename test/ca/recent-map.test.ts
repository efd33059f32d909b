/**
 * The two-generation map behind the node authorizer's parsed identities: a working set up to the
 * limit hits on every call once warm (cycled in order, the case a map cleared when full turned
 * into a miss per call), it never holds more than twice the limit, and under seeded random use
 * every hit returns the value last set for that key.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RecentMap } from '../../src/ca/index.js';
import { seededRng } from '../support/seeded-rng.js';

test('a working set of exactly the limit, cycled in order, misses only on the first pass', () => {
  const limit = 500;
  const map = new RecentMap<number>(limit);
  let misses = 0;
  for (let pass = 0; pass < 5; pass++) {
    for (let k = 0; k < limit; k++) {
      const v = map.get(`key-${k}`);
      if (v === undefined) {
        misses++;
        map.set(`key-${k}`, k);
      } else assert.equal(v, k);
    }
  }
  assert.equal(misses, limit);
  assert.ok(map.size <= 2 * limit);
});

test('a stream of distinct keys stays within twice the limit and keeps the recent ones', () => {
  const map = new RecentMap<number>(100);
  for (let k = 0; k < 10_000; k++) {
    map.set(`k${k}`, k);
    assert.ok(map.size <= 200, `held ${map.size} after ${k + 1} keys`);
  }
  for (let k = 9_900; k < 10_000; k++) assert.equal(map.get(`k${k}`), k, 'the last limit keys are kept');
  assert.equal(map.get('k0'), undefined, 'an old key is forgotten');
});

test('setLimit raises the bound: a working set above the old limit fits after it', () => {
  const map = new RecentMap<number>(100);
  map.setLimit(1000);
  for (let k = 0; k < 1000; k++) map.set(`k${k}`, k);
  for (let k = 0; k < 1000; k++) assert.equal(map.get(`k${k}`), k);
});

test('seeded random gets and sets: every hit is the value last set, bounded throughout', () => {
  for (const seed of [1, 2, 3]) {
    const rng = seededRng(seed);
    const map = new RecentMap<number>(64);
    const last = new Map<string, number>();
    let hits = 0;
    for (let step = 0; step < 50_000; step++) {
      const key = `k${Math.floor(rng() * 150)}`;
      if (rng() < 0.3) {
        map.set(key, step);
        last.set(key, step);
      } else {
        const v = map.get(key);
        if (v !== undefined) {
          hits++;
          assert.equal(v, last.get(key));
        }
      }
      assert.ok(map.size <= 128);
    }
    assert.ok(hits > 0, 'some gets hit');
  }
});
