import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type IdentityStatus, ownSvidOf, ownSvidProblem } from '../../src/broker/index.js';

const base: IdentityStatus = {
  identity: 'spiffe://cluster.local/ns/istio-system/sa/ztunnel',
  state: 'pending',
  serial: undefined,
  notBefore: undefined,
  notAfter: undefined,
  expiredAt: undefined,
  nextAttemptAt: undefined,
  holders: ['self'],
  consecutiveFailures: 0,
  lastError: undefined,
};

describe('own SVID state: readiness tells "expired" from "not obtained yet"', () => {
  it('missing before the first certificate, also after failed tries', () => {
    assert.deepEqual(ownSvidOf(undefined, 0), { state: 'missing', notAfter: undefined });
    const svid = ownSvidOf({ ...base, state: 'failed', consecutiveFailures: 3 }, 0);
    assert.equal(ownSvidProblem(svid), 'own SVID not obtained yet');
  });
  it('ready while the held certificate is valid (also while its refresh fails)', () => {
    const svid = ownSvidOf({ ...base, state: 'failed', serial: 'ab', notBefore: 0, notAfter: 10_000 }, 9_999);
    assert.deepEqual(svid, { state: 'ready', notAfter: 10_000 });
    assert.equal(ownSvidProblem(svid), undefined);
  });
  it('expired, with its notAfter, once the certificate is past it (held or dropped)', () => {
    const at = Date.UTC(2026, 0, 1, 12, 0, 0);
    const dropped = ownSvidOf({ ...base, state: 'expired', expiredAt: at }, at + 5_000);
    assert.equal(ownSvidProblem(dropped), 'own SVID expired at 2026-01-01T12:00:00.000Z, renewing');
    const held = ownSvidOf({ ...base, state: 'ready', serial: 'ab', notBefore: 0, notAfter: at }, at);
    assert.deepEqual(held, { state: 'expired', notAfter: at });
  });
});
