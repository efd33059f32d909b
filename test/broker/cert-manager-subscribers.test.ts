/**
 * The certificate manager's events and observers (issue 11): observers only watch, listeners
 * act, and neither can stop the queue — a throwing subscriber is logged and everything else
 * goes on. The trust bundle follows certificates through `subscribeAll`, not through an
 * observer. Fake clock, in-memory CA: nothing sleeps on real time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';
import { createLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { CertManager, TrustBundle, type CaClient, type CertEvent, type CertManagerObserver, type WorkloadCert } from '../../src/broker/index.js';

const HOUR = 3_600_000;
const id = (sa: string) => `spiffe://cluster.local/ns/default/sa/${sa}`;

/** A CA double that answers each call when the test says so, with the roots it is told to send. */
class PendingCa implements CaClient {
  readonly calls: Array<{ identity: string; answer: (roots?: Buffer[]) => void }> = [];
  #serial = 0;
  constructor(private readonly clock: FakeClock) {}
  fetchCertificate(identity: string, signal: AbortSignal): Promise<WorkloadCert> {
    return new Promise((resolve, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      this.calls.push({
        identity,
        answer: (roots = [Buffer.from('root-1')]) => {
          const now = this.clock.now();
          const serial = (++this.#serial).toString(16);
          resolve({ identity, chainDer: [Buffer.from(`leaf-${serial}`)], rootsDer: roots, privateKey: new Secret(Buffer.from('k')), serial, notBefore: now, notAfter: now + HOUR });
        },
      });
    });
  }
}

function capturedLogger() {
  const lines: Array<Record<string, unknown>> = [];
  return { lines, logger: createLogger({ level: 'debug', sink: (l) => lines.push(JSON.parse(l) as Record<string, unknown>) }) };
}

const boom = () => {
  throw new Error('subscriber bug');
};

describe('CertManager subscribers', () => {
  it('a throwing observer stops neither the queue nor the waiters; the throw is logged', async () => {
    const clock = new FakeClock();
    const ca = new PendingCa(clock);
    const { lines, logger } = capturedLogger();
    const observer: CertManagerObserver = { fetchStarted: boom, fetchSucceeded: boom, firstReady: boom };
    const manager = new CertManager({ ca, clock, rng: () => 0.5, maxConcurrentFetches: 1, logger, observer });
    manager.retain(id('a'), 'pod-a');
    manager.retain(id('b'), 'pod-b');
    assert.equal(ca.calls.length, 1, 'concurrency 1: one call at a time');
    const a = manager.waitForCert(id('a'));
    ca.calls[0]!.answer();
    assert.equal((await a).identity, id('a'), 'the waiter got its certificate');
    await flushMicrotasks();
    assert.deepEqual(ca.calls.map((c) => c.identity), [id('a'), id('b')], 'the queue went on to the next identity');
    ca.calls[1]!.answer();
    await flushMicrotasks();
    assert.equal(manager.inFlight, 0);
    assert.equal(manager.status(id('b'))?.state, 'ready');
    const logged = lines.filter((l) => l['msg'] === 'certificate manager subscriber threw; ignored');
    assert.deepEqual(
      [...new Set(logged.map((l) => l['subscriber']))].sort(),
      ['observer fetchStarted', 'observer fetchSucceeded', 'observer firstReady'],
    );
    assert.ok(logged.every((l) => l['err'] === 'subscriber bug' && l['level'] === 'error' && typeof l['identity'] === 'string'));
  });

  it('observers are separate: metrics and logs each see every event, whatever the other does', async () => {
    const clock = new FakeClock();
    const ca = new PendingCa(clock);
    const seen: string[] = [];
    const throwing: CertManagerObserver = { fetchSucceeded: boom };
    const watching: CertManagerObserver = { fetchSucceeded: (identity) => seen.push(identity) };
    const manager = new CertManager({ ca, clock, rng: () => 0.5, observer: [throwing, watching] });
    manager.retain(id('a'), 'pod-a');
    manager.retain(id('b'), 'pod-b');
    ca.calls[0]!.answer();
    ca.calls[1]!.answer();
    await flushMicrotasks();
    assert.deepEqual(seen, [id('a'), id('b')]);
  });

  it('a throwing listener does not keep the others from their events, and refreshes go on', async () => {
    const clock = new FakeClock();
    const ca = new PendingCa(clock);
    const { lines, logger } = capturedLogger();
    const manager = new CertManager({ ca, clock, rng: () => 0.5, logger });
    manager.retain(id('x'), 'pod-x');
    const events: CertEvent['type'][] = [];
    const all: string[] = [];
    manager.subscribe(id('x'), boom);
    manager.subscribe(id('x'), (e) => events.push(e.type));
    manager.subscribeAll(boom);
    manager.subscribeAll((identity, e) => all.push(`${e.type} ${identity}`));
    ca.calls[0]!.answer();
    await flushMicrotasks();
    await clock.advance(HOUR / 2); // the refresh
    assert.equal(ca.calls.length, 2, 'the refresh timer was armed despite the throws');
    ca.calls[1]!.answer();
    await flushMicrotasks();
    manager.release(id('x'), 'pod-x');
    await clock.advance(30_000);
    assert.deepEqual(events, ['updated', 'updated', 'forgotten']);
    assert.deepEqual(all, [`updated ${id('x')}`, `updated ${id('x')}`, `forgotten ${id('x')}`]);
    const subscribers = lines.filter((l) => l['msg'] === 'certificate manager subscriber threw; ignored').map((l) => l['subscriber']);
    assert.deepEqual(subscribers.sort(), [...Array(3).fill('subscribe listener'), ...Array(3).fill('subscribeAll listener')]);
  });

  it('the trust bundle follows new roots through subscribeAll, before the certificate reaches its consumers', async () => {
    const clock = new FakeClock();
    const ca = new PendingCa(clock);
    const manager = new CertManager({ ca, clock, rng: () => 0.5 });
    const bundle = new TrustBundle('cluster.local', [Buffer.from('root-1')]);
    bundle.follow(manager);
    manager.retain(id('r'), 'pod-r');
    const seenWithCert: string[] = [];
    manager.subscribe(id('r'), () => seenWithCert.push(bundle.rootsDer.map((r) => r.toString()).join(',')));
    const first = manager.waitForCert(id('r')).then(() => bundle.rootsDer.map((r) => r.toString()).join(','));
    ca.calls[0]!.answer([Buffer.from('root-1'), Buffer.from('root-2')]);
    assert.equal(await first, 'root-1,root-2', 'a waiter finds the roots of its certificate');
    assert.equal(bundle.version, 1);
    await clock.advance(HOUR / 2);
    ca.calls[1]!.answer([Buffer.from('root-2')]);
    await flushMicrotasks();
    assert.deepEqual(seenWithCert, ['root-1,root-2', 'root-2'], 'each listener call saw the bundle of the new certificate');
  });

  it('a throwing bundle listener is logged and the others still hear of the change', () => {
    const { lines, logger } = capturedLogger();
    const bundle = new TrustBundle('cluster.local', [Buffer.from('root-1')], { logger });
    const heard: number[] = [];
    bundle.onChange(boom);
    bundle.onChange((roots) => heard.push(roots.length));
    assert.equal(bundle.update([Buffer.from('root-1'), Buffer.from('root-2')]), true);
    assert.deepEqual(heard, [2]);
    assert.equal(lines.filter((l) => l['msg'] === 'trust bundle listener threw; ignored').length, 1);
  });
});
