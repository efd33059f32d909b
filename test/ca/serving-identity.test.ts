/**
 * The CA's serving identity on a FakeClock: renewed at half-life (and not before), re-issued at
 * once when the signer's material changes, one issuance at a time, and withdrawn exactly at
 * notAfter when the signer cannot renew it (an expired certificate is never presented), then
 * back when the signer can issue again. Time moves only by FakeClock advances.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { FakeClock } from '../support/fake-clock.js';
import { createLogger, silentLogger, type LogFields } from '../../src/core/log.js';
import { ServingIdentity, SERVING_CERT_TTL_SECONDS, type ServingEvent } from '../../src/ca/index.js';
import { InstalledSigner, rootMaterial } from './support/installed-signer.js';

function setup(options: { readonly ttlSeconds?: number } = {}) {
  const clock = new FakeClock(Date.now());
  const logs: LogFields[] = [];
  const logger = createLogger({ level: 'debug', sink: (l) => logs.push(JSON.parse(l) as LogFields) });
  const signer = new InstalledSigner({ clock, logger: silentLogger, maxTtlSeconds: 86400 });
  const serving = new ServingIdentity({ signer, dnsNames: ['localhost', '127.0.0.1'], clock, logger, ...(options.ttlSeconds ? { ttlSeconds: options.ttlSeconds } : {}) });
  const events: ServingEvent[] = [];
  serving.onChange((e) => events.push(e));
  return { clock, logs, signer, serving, events };
}

/** Resolves at the next event of `kind`. */
function next(serving: ServingIdentity, kind: ServingEvent): Promise<void> {
  return new Promise((resolve) => {
    const off = serving.onChange((e) => {
      if (e !== kind) return;
      off();
      resolve();
    });
  });
}

function presented(serving: ServingIdentity): X509Certificate {
  const id = serving.identity.current();
  assert.ok(id, 'a certificate is presented');
  return new X509Certificate(id.certificate);
}

test('serving identity: issued at start, renewed at half-life on the injected clock and not before', async (t) => {
  const { clock, signer, serving, events } = setup();
  t.after(() => serving.stop());
  signer.use(await rootMaterial('O=first'));
  await serving.start();
  const first = presented(serving);
  assert.equal(first.issuer, 'O=first');
  assert.deepEqual(events, ['issued']);
  const lifetime = serving.notAfterMs! - clock.now();
  assert.ok(lifetime > (SERVING_CERT_TTL_SECONDS - 1) * 1000 && lifetime <= SERVING_CERT_TTL_SECONDS * 1000, `lifetime ${lifetime} ms`);
  // Two timers: the renewal at half-life (the earliest) and the withdrawal at notAfter.
  assert.equal(clock.pendingTimers, 2);
  assert.equal(clock.nextDue! - clock.now(), lifetime / 2);

  await clock.advance(lifetime / 2 - 1);
  assert.deepEqual(events, ['issued'], 'nothing before half-life');
  const renewed = next(serving, 'issued');
  await clock.advance(1);
  await renewed;
  const second = presented(serving);
  assert.notEqual(second.serialNumber, first.serialNumber);
  assert.ok(Date.parse(second.validTo) > Date.parse(first.validTo), 'the renewal lasts longer');
  assert.equal(serving.problem(), undefined);
});

test('serving identity: follows signer changes at once, one issuance at a time, ending on the newest material', async (t) => {
  const { clock, signer, serving, events } = setup();
  t.after(() => serving.stop());
  signer.use(await rootMaterial('O=first'));
  await serving.start();
  const start = clock.now();

  const changed = next(serving, 'issued');
  signer.use(await rootMaterial('O=second'));
  await changed;
  assert.equal(presented(serving).issuer, 'O=second', 'issued by the new material without any clock advance');
  assert.equal(clock.now(), start);

  // Three changes in one turn: the one running, then one more for the newest.
  const [a, b, c] = await Promise.all([rootMaterial('O=a'), rootMaterial('O=b'), rootMaterial('O=c')]);
  events.length = 0;
  signer.use(a);
  signer.use(b);
  signer.use(c);
  await serving.renew(); // joins the issuance in progress, which then runs once more
  assert.equal(presented(serving).issuer, 'O=c');
  assert.ok(events.length <= 3 && events.length >= 2, `issued ${events.length} times for 3 changes, serially`);
  await serving.renew();
  assert.equal(presented(serving).issuer, 'O=c');
});

test('serving identity: a signer that cannot renew gets its certificate withdrawn exactly at notAfter, and back once it can', async (t) => {
  const { clock, logs, signer, serving, events } = setup({ ttlSeconds: 3600 });
  t.after(() => serving.stop());
  const material = await rootMaterial('O=only');
  signer.use(material);
  await serving.start();
  const notAfter = serving.notAfterMs!;
  await signer.close(); // not ready from now on: renewals are skipped and retried

  // Past half-life: the renewal finds the signer not ready; the old certificate is still good.
  await clock.advance(notAfter - clock.now() - 1);
  assert.equal(presented(serving).issuer, 'O=only', 'still presented one ms before notAfter');
  assert.deepEqual(events, ['issued']);

  await clock.advance(1);
  assert.deepEqual(events, ['issued', 'withdrawn']);
  assert.equal(serving.identity.current(), null, 'never presented past notAfter');
  assert.equal(serving.notAfterMs, undefined);
  assert.match(serving.problem() ?? '', /^serving certificate expired at .* and was withdrawn \(signer not ready: signer closed\)$/);
  assert.ok(logs.some((l) => String(l.msg).startsWith('serving certificate expired before it could be renewed; withdrawn')));

  // The signer has material again: a certificate at once (its change), no clock advance needed.
  const back = next(serving, 'issued');
  signer.use(await rootMaterial('O=again'));
  await back;
  assert.equal(presented(serving).issuer, 'O=again');
  assert.equal(serving.problem(), undefined);
});

test('serving identity: stop() cancels its timers and stops following the signer', async () => {
  const { clock, signer, serving, events } = setup();
  signer.use(await rootMaterial('O=first'));
  await serving.start();
  assert.equal(clock.pendingTimers, 2);
  await serving.stop();
  assert.equal(clock.pendingTimers, 0);
  signer.use(await rootMaterial('O=later'));
  await serving.renew();
  assert.deepEqual(events, ['issued']);
});
