import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jitter } from '../../src/core/rng.js';

test('jitter spans ±fraction around the base', () => {
  assert.equal(jitter(1000, 0.1, () => 0), 900);
  assert.equal(jitter(1000, 0.1, () => 0.5), 1000);
  assert.ok(Math.abs(jitter(1000, 0.1, () => 0.999999) - 1100) < 0.01);
  assert.equal(jitter(1000, 0, () => 0.3), 1000);
});
