/**
 * The certificate manager against an in-memory CA client and a fake clock, in the spirit of
 * ztunnel's manager tests: nothing here sleeps on real time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';
import { Secret } from '../../src/core/secret.js';
import { backoffCeiling, BrokerError, type CaClient, type CertEvent, CertManager, type CertManagerObserver, type WorkloadCert } from '../../src/broker/index.js';

const HOUR = 3_600_000;
const id = (sa: string) => `spiffe://cluster.local/ns/default/sa/${sa}`;

interface Call {
  readonly identity: string;
  /** Fake-clock time the call was made. */
  readonly at: number;
  readonly signal: AbortSignal;
  succeed(ttlMs?: number): void;
  fail(message?: string): void;
}

/** An in-memory CA: every call waits until the test answers it (or answers at once in `auto` mode). */
class ScriptedCa implements CaClient {
  readonly calls: Call[] = [];
  auto: 'succeed' | 'fail' | undefined;
  #serial = 0;

  constructor(private readonly clock: FakeClock) {}

  fetchCertificate(identity: string, signal: AbortSignal): Promise<WorkloadCert> {
    return new Promise((resolve, reject) => {
      const call: Call = {
        identity,
        at: this.clock.now(),
        signal,
        succeed: (ttlMs = HOUR) => {
          const now = this.clock.now();
          resolve({
            identity,
            chainDer: [Buffer.from(`leaf-${identity}`)],
            rootsDer: [Buffer.from('root')],
            privateKey: new Secret(Buffer.from('key')),
            serial: (++this.#serial).toString(16),
            notBefore: now,
            notAfter: now + ttlMs,
          });
        },
        fail: (message = 'CA unavailable') => reject(new Error(message)),
      };
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      this.calls.push(call);
      if (this.auto === 'succeed') call.succeed();
      if (this.auto === 'fail') call.fail();
    });
  }

  last(): Call {
    const c = this.calls.at(-1);
    assert.ok(c, 'expected a CA call');
    return c;
  }
}

function setup(opts: { concurrency?: number; rng?: () => number; observer?: CertManagerObserver } = {}) {
  const clock = new FakeClock();
  const ca = new ScriptedCa(clock);
  const manager = new CertManager({
    ca,
    clock,
    rng: opts.rng ?? (() => 0.5),
    maxConcurrentFetches: opts.concurrency ?? 8,
    forgetGraceMs: 30_000,
    ...(opts.observer ? { observer: opts.observer } : {}),
  });
  return { clock, ca, manager };
}

describe('CertManager', () => {
  it('fetches in priority order with concurrency 1, upgrading a queued identity', async () => {
    const { ca, manager } = setup({ concurrency: 1 });
    manager.retain(id('first'), 'pod-1', 'warmup');
    assert.equal(ca.calls.length, 1, 'first fetch starts at once');
    manager.retain(id('bg'), 'pod-2', 'background');
    manager.retain(id('warm'), 'pod-3', 'warmup');
    manager.retain(id('urgent'), 'pod-4', 'background');
    const urgent = manager.waitForCert(id('urgent')); // upgrades background -> realtime
    assert.equal(manager.queued, 3);
    assert.equal(ca.calls.length, 1, 'concurrency 1: nothing else in flight');

    for (let i = 0; i < 4; i++) {
      ca.calls[i]!.succeed();
      await flushMicrotasks();
    }
    assert.deepEqual(
      ca.calls.map((c) => c.identity),
      [id('first'), id('urgent'), id('warm'), id('bg')],
    );
    assert.equal((await urgent).identity, id('urgent'));
    assert.equal(manager.peakInFlight, 1);
  });

  it('shares one CA call between 4 concurrent requests for one identity', async () => {
    const { ca, manager } = setup();
    manager.retain(id('shared'), 'pod-a');
    manager.retain(id('shared'), 'pod-b');
    const waits = [1, 2, 3, 4].map(() => manager.waitForCert(id('shared')));
    assert.equal(ca.calls.length, 1);
    ca.last().succeed();
    const certs = await Promise.all(waits);
    assert.equal(ca.calls.length, 1);
    assert.ok(certs.every((c) => c === certs[0]), 'all four got the same certificate');
    assert.equal(manager.status(id('shared'))?.state, 'ready');
  });

  it('makes no CA call before half-life and exactly one after it', async () => {
    const { clock, ca, manager } = setup({ rng: () => 0.5 });
    manager.retain(id('rot'), 'pod-1');
    ca.last().succeed(HOUR);
    await manager.waitForCert(id('rot'));
    await clock.waitForTimers(1);
    assert.equal(manager.status(id('rot'))?.nextAttemptAt, clock.now() + HOUR / 2);

    await clock.advance(HOUR / 2 - 1);
    assert.equal(ca.calls.length, 1, 'no refresh before half-life');
    await clock.advance(1);
    assert.equal(ca.calls.length, 2, 'one refresh at half-life');
    assert.equal(ca.last().identity, id('rot'));
  });

  it('notifies subscribers with the new certificate on rotation', async () => {
    const { clock, ca, manager } = setup();
    manager.retain(id('sub'), 'pod-1');
    ca.last().succeed();
    const first = await manager.waitForCert(id('sub'));
    const events: CertEvent[] = [];
    manager.subscribe(id('sub'), (e) => events.push(e));
    await clock.advance(HOUR / 2);
    ca.last().succeed();
    await flushMicrotasks();
    assert.equal(events.length, 1);
    const ev = events[0]!;
    assert.equal(ev.type, 'updated');
    assert.notEqual(ev.type === 'updated' ? ev.cert.serial : '', first.serial);
    assert.equal(manager.current(id('sub'))?.serial, ev.type === 'updated' ? ev.cert.serial : '');
  });

  it('forgets an identity while its fetch is still queued: no CA call, waiters rejected', async () => {
    const { clock, ca, manager } = setup({ concurrency: 1 });
    manager.retain(id('blocker'), 'pod-1');
    manager.retain(id('gone'), 'pod-2');
    const waiting = manager.waitForCert(id('gone'));
    const rejected = assert.rejects(waiting, (err: unknown) => err instanceof BrokerError && err.code === 'ERR_IDENTITY_FORGOTTEN');
    const events: CertEvent[] = [];
    manager.subscribe(id('gone'), (e) => events.push(e));
    manager.release(id('gone'), 'pod-2');

    await clock.advance(29_999);
    assert.equal(manager.status(id('gone'))?.state, 'pending', 'still tracked within the grace period');
    await clock.advance(1);
    await rejected;
    assert.equal(manager.status(id('gone')), undefined);
    assert.deepEqual(events, [{ type: 'forgotten' }]);

    ca.last().succeed();
    await flushMicrotasks();
    assert.deepEqual(
      ca.calls.map((c) => c.identity),
      [id('blocker')],
      'the forgotten identity never reached the CA',
    );
  });

  it('aborts an in-flight fetch when the identity is forgotten, and a new pod within the grace period keeps it', async () => {
    const { clock, ca, manager } = setup();
    manager.retain(id('a'), 'pod-1');
    const call = ca.last();
    manager.release(id('a'), 'pod-1');
    await clock.advance(10_000);
    manager.retain(id('a'), 'pod-2'); // back within the grace period
    await clock.advance(60_000);
    assert.equal(call.signal.aborted, false);
    assert.ok(manager.status(id('a')));

    manager.release(id('a'), 'pod-2');
    await clock.advance(30_000);
    assert.equal(call.signal.aborted, true, 'in-flight CA call cancelled');
    assert.equal(manager.size, 0);
  });

  it('keeps an identity while any of several holders is left (one holder, then a set), whatever order they leave in', async () => {
    const { clock, manager } = setup();
    manager.retain(id('a'), 'pod-1');
    manager.retain(id('a'), 'pod-1'); // again: still one holder
    assert.deepEqual(manager.status(id('a'))?.holders, ['pod-1']);
    manager.retain(id('a'), 'pod-2');
    manager.retain(id('a'), 'pod-3');
    assert.deepEqual(manager.status(id('a'))?.holders, ['pod-1', 'pod-2', 'pod-3']);
    manager.release(id('a'), 'pod-9'); // not a holder: nothing changes
    manager.release(id('a'), 'pod-1');
    manager.release(id('a'), 'pod-3');
    await clock.advance(60_000);
    assert.deepEqual(manager.status(id('a'))?.holders, ['pod-2']);
    manager.release(id('a'), 'pod-2');
    assert.deepEqual(manager.status(id('a'))?.holders, []);
    await clock.advance(30_000);
    assert.equal(manager.size, 0, 'forgotten once the last holder left for the grace period');
  });

  it('backs off exponentially per identity and resets the backoff after a success', async () => {
    const { clock, ca, manager } = setup({ rng: () => 0.5 });
    manager.retain(id('flaky'), 'pod-1');
    const delays: number[] = [];
    const failOnce = async () => {
      ca.last().fail();
      await flushMicrotasks();
      const st = manager.status(id('flaky'))!;
      delays.push(st.nextAttemptAt! - clock.now());
      const before = ca.calls.length;
      await clock.advance(st.nextAttemptAt! - clock.now());
      assert.equal(ca.calls.length, before + 1, 'retried when the backoff elapsed');
    };
    await failOnce();
    await failOnce();
    await failOnce();
    assert.deepEqual(delays, [500, 1000, 2000]);
    assert.equal(manager.status(id('flaky'))?.consecutiveFailures, 3);

    ca.last().succeed(HOUR);
    await flushMicrotasks();
    assert.equal(manager.status(id('flaky'))?.consecutiveFailures, 0);
    await clock.advance(HOUR / 2); // refresh
    delays.length = 0;
    await failOnce();
    assert.deepEqual(delays, [500], 'backoff starts over after a success');
  });

  it('keeps serving the old certificate while refreshes fail, until it expires', async () => {
    const { clock, ca, manager } = setup({ rng: () => 0.5 });
    manager.retain(id('steady'), 'pod-1');
    ca.last().succeed(HOUR);
    const original = await manager.waitForCert(id('steady'));
    await clock.advance(HOUR / 2);
    ca.last().fail();
    await flushMicrotasks();
    const st = manager.status(id('steady'))!;
    assert.equal(st.state, 'failed');
    assert.equal(manager.current(id('steady')), original, 'old cert still served');
    assert.equal(await manager.waitForCert(id('steady')), original, 'consumers get it without waiting');

    // The CA stays down; the cert eventually expires and is no longer served.
    ca.auto = 'fail';
    await clock.advance(HOUR / 2);
    assert.equal(manager.current(id('steady')), undefined);
    ca.auto = undefined;
    const waiting = manager.waitForCert(id('steady'));
    await clock.advance(manager.status(id('steady'))!.nextAttemptAt! - clock.now());
    ca.last().succeed();
    assert.notEqual((await waiting).serial, original.serial);
  });

  it('rejects waiters with ERR_CERT_UNAVAILABLE when the first fetch fails, and recovers later', async () => {
    const { clock, ca, manager } = setup();
    manager.retain(id('new'), 'pod-1');
    const waiting = manager.waitForCert(id('new'));
    ca.last().fail();
    await assert.rejects(waiting, (err: unknown) => err instanceof BrokerError && err.code === 'ERR_CERT_UNAVAILABLE');
    await clock.advance(500);
    ca.last().succeed();
    await flushMicrotasks();
    assert.equal(manager.status(id('new'))?.state, 'ready');
  });

  it('honours a shorter lifetime imposed by the CA', async () => {
    const { clock, ca, manager } = setup({ rng: () => 0.5 });
    manager.retain(id('short'), 'pod-1');
    ca.last().succeed(10 * 60_000);
    await flushMicrotasks();
    await clock.advance(5 * 60_000 - 1);
    assert.equal(ca.calls.length, 1);
    await clock.advance(1);
    assert.equal(ca.calls.length, 2);
  });

  it('counts identities by state and cancels everything on stop', async () => {
    const { ca, manager } = setup();
    manager.retain(id('x'), 'p1');
    manager.retain(id('y'), 'p2');
    ca.calls[0]!.succeed();
    await flushMicrotasks();
    assert.deepEqual(manager.countByState(), { pending: 1, ready: 1, failed: 0, expired: 0 });
    const waiting = manager.waitForCert(id('y'));
    manager.stop();
    await assert.rejects(waiting, (err: unknown) => err instanceof BrokerError && err.code === 'ERR_SHUTTING_DOWN');
    assert.equal(ca.calls[1]!.signal.aborted, true);
  });

  it('CA down from the refresh on: retries reach the CA by the held certificate\'s expiry at the latest, then every <= 5 s; a CA back is used within 5 s', async () => {
    // Worst-case jitter: every delay at its longest.
    const expired: string[] = [];
    const { clock, ca, manager } = setup({ rng: () => 0.999_999, observer: { expired: (identity) => expired.push(identity) } });
    manager.retain(id('outage'), 'pod-1');
    ca.last().succeed(20 * 60_000);
    const cert = await manager.waitForCert(id('outage'));
    ca.auto = 'fail';
    await clock.advance(cert.notAfter + 60_000 - clock.now());

    const times = ca.calls.slice(1).map((c) => c.at);
    assert.ok(times.length > 10, `retried ${times.length} times`);
    for (let i = 1; i < times.length; i++) {
      const from = times[i - 1]!;
      const gap = times[i]! - from;
      assert.ok(from >= cert.notAfter || times[i]! <= cert.notAfter, `retry at ${times[i]} jumped over notAfter ${cert.notAfter}`);
      const ceiling = backoffCeiling(cert, from);
      assert.ok(gap <= ceiling + 1, `gap ${gap} ms after ${from - cert.notAfter} ms (relative to expiry) is over the ceiling ${ceiling}`);
    }
    assert.ok(times.includes(cert.notAfter), 'one try exactly at expiry, when the backoff was cut there');
    const after = times.filter((t) => t >= cert.notAfter);
    assert.ok(after.length >= 12, `${after.length} tries in the minute after expiry`);

    // Expired: dropped, reported as such, never served.
    const st = manager.status(id('outage'))!;
    assert.equal(st.state, 'expired');
    assert.equal(st.expiredAt, cert.notAfter);
    assert.equal(st.serial, undefined, 'the expired certificate is no longer held');
    assert.equal(manager.current(id('outage')), undefined);
    assert.deepEqual(expired, [id('outage')], 'reported once');
    assert.deepEqual(manager.countByState(), { pending: 0, ready: 0, failed: 0, expired: 1 });

    // The CA answers again: the next try (<= 5 s away) gets the certificate.
    ca.auto = 'succeed';
    await clock.advance(5_000);
    assert.equal(manager.status(id('outage'))?.state, 'ready');
    assert.notEqual(manager.current(id('outage'))?.serial, cert.serial);
    assert.equal(manager.status(id('outage'))?.expiredAt, undefined);
  });

  it('drops a certificate at notAfter while its refresh call hangs; a waiter gets the next one, never the expired one', async () => {
    const { clock, ca, manager } = setup({ rng: () => 0.5 });
    manager.retain(id('hang'), 'pod-1');
    ca.last().succeed(HOUR);
    const old = await manager.waitForCert(id('hang'));
    await clock.advance(HOUR / 2);
    const refresh = ca.last();
    assert.equal(ca.calls.length, 2, 'refresh in flight, never answered');
    await clock.advance(HOUR / 2);
    assert.equal(manager.status(id('hang'))?.state, 'expired');
    assert.equal(manager.current(id('hang')), undefined);

    let settled = false;
    const waiting = manager.waitForCert(id('hang')).finally(() => (settled = true));
    await flushMicrotasks();
    assert.ok(!settled, 'waits rather than getting the expired certificate');
    refresh.succeed();
    const got = await waiting;
    assert.notEqual(got.serial, old.serial);
    assert.ok(got.notAfter > clock.now());
  });

  it('never hands out a certificate the CA sent already expired (a CA clock far behind)', async () => {
    const { ca, manager } = setup();
    manager.retain(id('stale'), 'pod-1');
    const waiting = manager.waitForCert(id('stale'));
    ca.last().succeed(-1_000);
    await assert.rejects(waiting, (err: unknown) => err instanceof BrokerError && err.code === 'ERR_CERT_UNAVAILABLE');
    const st = manager.status(id('stale'))!;
    assert.equal(st.state, 'failed');
    assert.match(st.lastError ?? '', /ERR_CA_BAD_RESPONSE|expired/);
    assert.equal(manager.current(id('stale')), undefined);
  });
});
