/**
 * The certificate manager's timers: many `ClockTimer`s behind one clock sleep (`TimerQueue`),
 * and the certificates it holds compacted and shared (`CertInterner`). Fake clock, no real sleeps.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { FakeClock } from '../support/fake-clock.js';
import { Secret } from '../../src/core/secret.js';
import { CertManager, type CaClient, type WorkloadCert } from '../../src/broker/index.js';
import { ClockTimer, TimerQueue } from '../../src/broker/cache/index.js';

const HOUR = 3_600_000;
const id = (i: number) => `spiffe://cluster.local/ns/default/sa/sa-${i}`;

describe('TimerQueue', () => {
  it('keeps one clock sleep for any number of armed timers and fires each at its due time, earliest first', async () => {
    const clock = new FakeClock();
    const queue = new TimerQueue(clock);
    const start = clock.now();
    const fired: Array<[number, number]> = [];
    const timers = Array.from({ length: 50 }, () => new ClockTimer(queue));
    // Due times out of order, with ties (armed order breaks them).
    timers.forEach((t, i) => t.arm(((i * 37) % 10) * 100, () => fired.push([i, clock.now() - start])));
    assert.equal(queue.size, 50);
    assert.equal(clock.pendingTimers, 1);
    assert.equal(timers[3]!.due, start + 100 * ((3 * 37) % 10));
    await clock.advance(1000);
    assert.equal(fired.length, 50);
    const expected = timers.map((_, i) => [i, ((i * 37) % 10) * 100] as [number, number]).sort((a, b) => a[1] - b[1] || a[0] - b[0]);
    assert.deepEqual(fired, expected);
    assert.equal(clock.pendingTimers, 0);
    assert.ok(timers.every((t) => !t.armed && t.due === undefined));
  });

  it('re-arming replaces, cancelling removes, and with nothing armed no sleep is left', async () => {
    const clock = new FakeClock();
    const queue = new TimerQueue(clock);
    const a = new ClockTimer(queue);
    const b = new ClockTimer(queue);
    const fired: string[] = [];
    a.arm(500, () => fired.push('a1'));
    b.arm(100, () => fired.push('b'));
    a.arm(50, () => fired.push('a2'));
    assert.equal(clock.nextDue, clock.now() + 50);
    b.cancel();
    await clock.advance(1000);
    assert.deepEqual(fired, ['a2']);
    a.arm(10, () => fired.push('a3'));
    a.cancel();
    assert.equal(clock.pendingTimers, 0);
    await clock.advance(1000);
    assert.deepEqual(fired, ['a2']);
  });

  it('never fires during arm, and a timer armed for "now" by a firing callback waits for the next wake', async () => {
    const clock = new FakeClock();
    const queue = new TimerQueue(clock);
    const t = new ClockTimer(queue);
    let fires = 0;
    const again = () => {
      fires++;
      if (fires < 3) t.arm(0, again);
    };
    t.arm(0, again);
    assert.equal(fires, 0);
    await clock.advance(0);
    assert.equal(fires, 3, 'each re-arming fired on a wake of its own (the fake clock runs due sleeps in turn)');
    assert.equal(clock.pendingTimers, 0);
  });
});

/** A CA answering at once: leaf and key as views into one large buffer, the same intermediate and root in fresh copies each time. */
function viewsCa(clock: FakeClock, intermediate: Buffer, root: Buffer): CaClient & { answers: WorkloadCert[] } {
  const answers: WorkloadCert[] = [];
  return {
    answers,
    async fetchCertificate(identity: string): Promise<WorkloadCert> {
      const message = randomBytes(64 * 1024); // e.g. a decoded gRPC response
      const cert: WorkloadCert = {
        identity,
        chainDer: [message.subarray(100, 700), Buffer.from(intermediate)],
        rootsDer: [Buffer.from(root)],
        privateKey: new Secret(message.subarray(800, 938)),
        serial: String(answers.length),
        notBefore: clock.now(),
        notAfter: clock.now() + HOUR,
      };
      answers.push(cert);
      return cert;
    },
  };
}

describe('CertManager memory per identity', () => {
  it('arms every identity\'s refresh and expiry timers behind a single clock sleep', async () => {
    const clock = new FakeClock();
    const ca = viewsCa(clock, randomBytes(900), randomBytes(700));
    const certs = new CertManager({ ca, clock, rng: () => 0.5, maxConcurrentFetches: 8 });
    for (let i = 0; i < 100; i++) certs.retain(id(i), `pod-${i}`);
    for (let i = 0; i < 100; i++) await certs.waitForCert(id(i));
    for (let i = 0; i < 100; i++) assert.ok(certs.status(id(i))!.nextAttemptAt! > clock.now());
    assert.equal(clock.pendingTimers, 1, '200 timers (refresh and expiry of 100 identities), one sleep');
    // Refreshes still happen, each identity once per half-life or so.
    await clock.advance(HOUR);
    assert.ok(ca.answers.length >= 200, `refreshed: ${ca.answers.length} CA calls`);
    certs.stop();
    assert.equal(clock.pendingTimers, 0);
  });

  it('holds the leaf and key in exact-size buffers of their own, one shared copy of the intermediate, root and roots list', async () => {
    const clock = new FakeClock();
    const intermediate = randomBytes(900);
    const root = randomBytes(700);
    const ca = viewsCa(clock, intermediate, root);
    const certs = new CertManager({ ca, clock, rng: () => 0.5 });
    const held: WorkloadCert[] = [];
    for (let i = 0; i < 20; i++) {
      certs.retain(id(i), `pod-${i}`);
      held.push(await certs.waitForCert(id(i)));
    }
    for (const [i, cert] of held.entries()) {
      const answer = ca.answers[i]!;
      assert.deepEqual(cert.chainDer, answer.chainDer, 'same content');
      assert.deepEqual(cert.rootsDer, answer.rootsDer);
      assert.deepEqual(cert.privateKey.reveal(), answer.privateKey.reveal());
      assert.equal(cert.serial, answer.serial);
      assert.equal(cert.notAfter, answer.notAfter);
      const leaf = cert.chainDer[0]!;
      const key = cert.privateKey.reveal();
      assert.equal(leaf.buffer.byteLength, leaf.length, 'the leaf does not keep the 64 KiB message alive');
      assert.equal(key.buffer.byteLength, key.length, 'nor does the key');
      assert.notEqual(key.buffer, leaf.buffer, 'the key shares no memory with anything sent on the wire');
      assert.equal(cert.chainDer[1], held[0]!.chainDer[1], 'one intermediate for all');
      assert.equal(cert.rootsDer, held[0]!.rootsDer, 'one roots list for all');
      assert.deepEqual(certs.current(id(i)), cert);
    }
    certs.stop();
  });
});
