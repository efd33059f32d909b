/**
 * A CA that refuses an identity is not a CA that cannot be reached (issue 11). The CA client
 * reports a refusal (UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT) through the error
 * model's status, and the refresh policy keeps the full exponential backoff (to 150 s) for it,
 * while an unreachable CA is retried within 5 s whenever no valid certificate is held. Pure
 * policy checks, then the certificate manager on a fake clock with the CA client's own errors.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import {
  BrokerError,
  CaCallError,
  CertManager,
  fetchFailureOf,
  retryDelay,
} from '../../src/broker/index.js';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';
import { AnsweringCa } from './support/answering-ca.js';

const MIN = 60_000;
const centred = () => 0.5;
/** Centred draws: doubling, then the middle of the 20 % band below the 150 s ceiling. */
const doubling = [500, 1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 64_000, 128_000, 135_000, 135_000];

describe('refresh policy: refused vs unreachable', () => {
  it('the CA client maps refusals onto refusal statuses, every other code onto unavailable', () => {
    const of = (code: GrpcStatus) => CaCallError.fromStatus(code, 'details');
    assert.deepEqual(
      [GrpcStatus.UNAUTHENTICATED, GrpcStatus.PERMISSION_DENIED, GrpcStatus.INVALID_ARGUMENT].map((c) => [of(c).status, fetchFailureOf(of(c))]),
      [['unauthenticated', 'refused'], ['permission-denied', 'refused'], ['invalid-argument', 'refused']],
    );
    for (const code of [GrpcStatus.UNAVAILABLE, GrpcStatus.DEADLINE_EXCEEDED, GrpcStatus.INTERNAL, GrpcStatus.UNKNOWN, GrpcStatus.RESOURCE_EXHAUSTED, GrpcStatus.CANCELLED]) {
      assert.equal(of(code).status, 'unavailable', GrpcStatus[code]);
      assert.equal(fetchFailureOf(of(code)), 'unreachable', GrpcStatus[code]);
      assert.equal(of(code).code, 'ERR_CA_CALL_FAILED');
      assert.equal(of(code).grpcCode, GrpcStatus[code]);
    }
    assert.equal(fetchFailureOf(new Error('ECONNREFUSED')), 'unreachable', 'anything outside the error model');
    assert.equal(fetchFailureOf(new BrokerError('ERR_CA_BAD_RESPONSE', 'x', { status: 'unavailable' })), 'unreachable');
  });

  it('without a valid certificate: a refusal doubles up to 150 s, an unreachable CA stays under 5 s', () => {
    const delays = (failure: 'refused' | 'unreachable') => doubling.map((_, n) => retryDelay(n, undefined, 0, centred, undefined, failure));
    assert.deepEqual(delays('refused'), doubling);
    assert.deepEqual(delays('unreachable'), [500, 1_000, 2_000, 4_000, 4_500, 4_500, 4_500, 4_500, 4_500, 4_500, 4_500]);
    assert.deepEqual(doubling.map((_, n) => retryDelay(n, undefined, 0, centred)), delays('unreachable'), 'unreachable is the default');
    const expired = { notBefore: 0, notAfter: 1_000 };
    assert.equal(retryDelay(9, expired, 2_000, centred, undefined, 'refused'), 135_000, 'an expired certificate is no certificate');
  });

  it('with a valid certificate: a refusal never waits past its notAfter, and keeps 150 s far from it', () => {
    const cert = { notBefore: 0, notAfter: 60 * MIN };
    assert.equal(retryDelay(9, cert, 30 * MIN, centred, undefined, 'refused'), 135_000);
    assert.equal(retryDelay(9, cert, 60 * MIN - 90_000, centred, undefined, 'refused'), 90_000, 'cut at notAfter');
    assert.equal(retryDelay(9, cert, 60 * MIN - 90_000, centred, undefined, 'unreachable'), 20_250, 'unreachable: under a quarter of what is left (the middle of the band below it)');
    assert.ok(retryDelay(9, cert, 60 * MIN - 90_000, () => 0.999_999, undefined, 'refused') <= 90_000, 'jitter never passes notAfter');
  });
});

describe('CertManager: a CA that refuses an identity is asked with the full backoff', () => {
  const identity = 'spiffe://cluster.local/ns/default/sa/refused';
  const refusal = () => CaCallError.fromStatus(GrpcStatus.PERMISSION_DENIED, 'no pod of this service account on your node');
  const unreachable = () => CaCallError.fromStatus(GrpcStatus.UNAVAILABLE, 'connect ECONNREFUSED');

  function setup() {
    const clock = new FakeClock();
    const ca = new AnsweringCa(clock);
    const manager = new CertManager({ ca, clock, rng: centred });
    return { clock, ca, manager };
  }

  it('refusals: retries 0.5 s, 1 s, 2 s ... 150 s apart, not every 5 s', async () => {
    const { clock, ca, manager } = setup();
    ca.next = refusal;
    manager.retain(identity, 'pod-1');
    await flushMicrotasks();
    await clock.advance(10 * MIN);
    assert.deepEqual(ca.gaps().slice(0, doubling.length - 1), doubling.slice(0, -1));
    assert.ok(ca.times.length <= 13, `${ca.times.length} CA calls in 10 minutes (every 5 s would be ~120)`);
    assert.equal(manager.status(identity)?.state, 'failed');
    manager.stop();
  });

  it('unreachable: under 5 s while no certificate is held (unchanged)', async () => {
    const { clock, ca, manager } = setup();
    ca.next = unreachable;
    manager.retain(identity, 'pod-1');
    await flushMicrotasks();
    await clock.advance(2 * MIN);
    assert.ok(ca.gaps().every((g) => g <= 5_000), ca.gaps().join(','));
    assert.ok(ca.times.length >= 24, `${ca.times.length} CA calls in 2 minutes`);
    manager.stop();
  });

  it('a CA back from an outage that refuses once is asked again after 0.5 s: the backoff counts refusals in a row', async () => {
    const { clock, ca, manager } = setup();
    ca.next = unreachable;
    manager.retain(identity, 'pod-1');
    await flushMicrotasks();
    await clock.advance(5 * MIN);
    const failures = manager.status(identity)!.consecutiveFailures;
    assert.ok(failures > 50, `${failures} failures during the outage`);
    let refusals = 2;
    ca.next = () => (refusals-- > 0 ? refusal() : 'certificate');
    const waits: number[] = [];
    for (let i = 0; i < 3; i++) {
      const due = manager.status(identity)!.nextAttemptAt!;
      waits.push(due - clock.now());
      await clock.advance(due - clock.now());
    }
    assert.ok(waits[0]! <= 5_000, `the outage's last retry was ${waits[0]} ms away`);
    assert.deepEqual(waits.slice(1), [500, 1_000], 'after the first refusal 0.5 s, after the second 1 s: the refusal streak, not the outage count');
    assert.equal(manager.status(identity)?.state, 'ready');
    manager.stop();
  });
});
