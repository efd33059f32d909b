/**
 * A CA shedding load answers RESOURCE_EXHAUSTED with a retry pushback (grpc-retry-pushback-ms);
 * the CA client keeps it as the error's `retryAfterMs` and the refresh policy waits at least that
 * long, spread upwards so the nodes turned away together do not come back together — past the
 * 5 s ceiling of a missing certificate, never past a held certificate's notAfter nor 150 s.
 * Pure policy checks, then the certificate manager on a fake clock with the CA client's errors.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { CaCallError, CertManager, fetchFailureInfoOf, retryDelay } from '../../src/broker/index.js';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';
import { AnsweringCa } from './support/answering-ca.js';
import { seededRng } from '../support/seeded-rng.js';

const MIN = 60_000;
const shed = (ms: number) => CaCallError.fromStatus(GrpcStatus.RESOURCE_EXHAUSTED, 'too many open calls at the CA; retry later', undefined, ms);

describe('refresh policy: the CA\'s retry pushback', () => {
  it('the CA client keeps the pushback; the failure is still "unreachable" (not a refusal)', () => {
    assert.deepEqual(fetchFailureInfoOf(shed(8_000)), { kind: 'unreachable', retryAfterMs: 8_000 });
    assert.deepEqual(fetchFailureInfoOf(CaCallError.fromStatus(GrpcStatus.UNAVAILABLE, 'x')), { kind: 'unreachable' });
    assert.deepEqual(fetchFailureInfoOf(new Error('x')), { kind: 'unreachable' });
  });

  it('no certificate held: at least the pushback, past the 5 s ceiling, spread up to 1.5 x', () => {
    const info = fetchFailureInfoOf(shed(8_000));
    assert.equal(retryDelay(0, undefined, 0, () => 0, undefined, info), 8_000);
    assert.equal(retryDelay(0, undefined, 0, () => 0.5, undefined, info), 10_000);
    const rng = seededRng(3);
    const delays = Array.from({ length: 500 }, (_, n) => retryDelay(n % 12, undefined, 0, rng, undefined, info));
    assert.ok(delays.every((d) => d >= 8_000 && d < 12_000), `${Math.min(...delays)}..${Math.max(...delays)}`);
    assert.ok(new Set(delays.map((d) => Math.floor(d / 400))).size >= 9, 'spread over the band, not one instant');
    assert.equal(retryDelay(3, undefined, 0, () => 0.5, undefined, fetchFailureInfoOf(shed(100))), 4_000, 'a shorter pushback than the backoff: the backoff');
  });

  it('a held certificate is still refreshed before its notAfter; no pushback waits over 150 s', () => {
    const cert = { notBefore: 0, notAfter: 60 * MIN };
    assert.equal(retryDelay(0, cert, 60 * MIN - 3_000, () => 0.5, undefined, fetchFailureInfoOf(shed(20_000))), 3_000);
    assert.equal(retryDelay(0, undefined, 0, () => 0.5, undefined, fetchFailureInfoOf(shed(3_600_000))), 150_000);
  });
});

describe('CertManager: a CA that sheds load is asked again when it said', () => {
  it('RESOURCE_EXHAUSTED with a 20 s pushback: retries 20-30 s apart (not every <= 5 s), then the certificate', async () => {
    const clock = new FakeClock();
    const ca = new AnsweringCa(clock);
    const manager = new CertManager({ ca, clock, rng: seededRng(11) });
    const identity = 'spiffe://cluster.local/ns/default/sa/shed';
    ca.next = () => shed(20_000);
    manager.retain(identity, 'pod-1');
    await flushMicrotasks();
    await clock.advance(2 * MIN);
    assert.ok(ca.times.length >= 4 && ca.times.length <= 7, `${ca.times.length} calls in 2 minutes`);
    assert.ok(ca.gaps().every((g) => g >= 20_000 && g <= 30_000), ca.gaps().join(','));
    ca.next = () => 'certificate';
    await clock.advance(31_000);
    assert.equal(manager.status(identity)?.state, 'ready');
    manager.stop();
  });
});
