/**
 * ExpiringMap (behind the CA's token and refusal caches): an entry is there until its own expiry
 * (read off the injected clock), setting a key again makes it the newest, and the oldest goes
 * first beyond the bound.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ExpiringMap } from '../../src/core/expiring-map.js';
import { FakeClock } from '../support/fake-clock.js';

test('expiring map: an entry lives until its expiry and is dropped when looked up after it', async () => {
  const clock = new FakeClock();
  const m = new ExpiringMap<string>({ clock, maxEntries: 4 });
  m.set('a', 'A', clock.now() + 1000);
  await clock.advance(999);
  assert.equal(m.get('a'), 'A');
  await clock.advance(1);
  assert.equal(m.get('a'), undefined);
  assert.equal(m.size, 0);
});

test('expiring map: bounded, oldest insertion first; setting a key again makes it the newest', () => {
  const clock = new FakeClock();
  const m = new ExpiringMap<number>({ clock, maxEntries: 2 });
  const later = clock.now() + 60_000;
  m.set('a', 1, later);
  m.set('b', 2, later);
  m.set('a', 3, later);
  m.set('c', 4, later);
  assert.equal(m.size, 2);
  assert.equal(m.get('b'), undefined, 'b was the oldest');
  assert.equal(m.get('a'), 3);
  assert.equal(m.get('c'), 4);
});

test('expiring map: entry gives the value and its expiry in one lookup, and nothing once expired', async () => {
  const clock = new FakeClock();
  const m = new ExpiringMap<string>({ clock, maxEntries: 4 });
  const at = clock.now() + 500;
  m.set('a', 'A', at);
  assert.deepEqual({ ...m.entry('a') }, { value: 'A', expiresAtMs: at });
  assert.equal(m.expiresAt('a'), at);
  assert.equal(m.entry('b'), undefined);
  await clock.advance(500);
  assert.equal(m.entry('a'), undefined);
  assert.equal(m.expiresAt('a'), undefined);
  assert.equal(m.size, 0);
});
