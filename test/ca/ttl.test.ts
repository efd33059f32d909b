import { test } from 'node:test';
import assert from 'node:assert/strict';
import { thrownCode } from './support/error-code.js';
import { resolveTtlSeconds, validityFor } from '../../src/ca/index.js';

const policy = { defaultTtlSeconds: 86_400, maxTtlSeconds: 7_776_000, backdateSeconds: 120 };

test('0 means the default TTL; values up to the max are kept', () => {
  assert.equal(resolveTtlSeconds(0, policy), 86_400);
  assert.equal(resolveTtlSeconds(3600, policy), 3600);
  assert.equal(resolveTtlSeconds(7_776_000, policy), 7_776_000);
});

test('over max is rejected, not clamped; negative and non-integers are invalid', () => {
  assert.equal(thrownCode(() => resolveTtlSeconds(7_776_001, policy)), 'ERR_CA_TTL_OVER_MAX');
  assert.equal(thrownCode(() => resolveTtlSeconds(-1, policy)), 'ERR_CA_TTL_INVALID');
  assert.equal(thrownCode(() => resolveTtlSeconds(1.5, policy)), 'ERR_CA_TTL_INVALID');
  assert.equal(thrownCode(() => resolveTtlSeconds(Number.NaN, policy)), 'ERR_CA_TTL_INVALID');
});

test('notBefore is backdated and notAfter is clamped to the signer', () => {
  const now = Date.UTC(2026, 0, 1);
  const v = validityFor({ nowMs: now, ttlSeconds: 3600, backdateSeconds: 120, signerNotAfterMs: now + 10_000_000 });
  assert.equal(v.notBeforeMs, now - 120_000);
  assert.equal(v.notAfterMs, now + 3_600_000);
  const clamped = validityFor({ nowMs: now, ttlSeconds: 3600, backdateSeconds: 120, signerNotAfterMs: now + 60_000 });
  assert.equal(clamped.notAfterMs, now + 60_000);
});
