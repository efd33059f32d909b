/**
 * A CA outage end to end, on real time: the devcluster over HTTPS, the real CA over TLS, the
 * broker with short-lived certificates (6 s asked; the CA backdates notBefore by 2 min), the
 * Broker API over its Unix socket. The CA's port closes long enough for every certificate,
 * the broker's own SVID included, to expire and for every backoff to grow (>= 32 s, then the
 * CA comes back on the same port right after one of the own SVID's failed tries: the worst
 * moment for an exponential backoff). Meanwhile nothing expired is presented or handed out and
 * /readyz says "expired"; once the CA is back, every identity and the own SVID are ready
 * within a bounded wait (10 s, the goal of issue 10; measured 3.9-4.9 s: retries come at least
 * every 5 s without a valid certificate, test/broker/refresh-policy.test.ts) that the old schedule (150 s backoff ceiling on top of grpc-js's
 * own reconnect backoff) overran by minutes.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { status as GrpcStatus, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { type Broker, BrokerClient, firstMessage, splitDerCertificates, startBroker } from '../../src/broker/index.js';
import type { SubscribeToX509SVIDResponse as X509SvidResponse } from '../../src/protocol/spiffe-broker.js';
import { createLogger } from '../../src/core/log.js';
import { eventually } from './support/eventually.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD, type Svid } from './support/stack.js';
import { probeHandshake } from './support/tls-probe.js';

const CERT_TTL_SECONDS = 6;
/** The outage lasts at least this long before the CA comes back. */
const MIN_OUTAGE_MS = 32_000;
/** Upper bound for "every identity and the own SVID ready again" after the CA is back (issue 10: 10 s). */
const RECOVERY_BOUND_MS = 10_000;
const POLL_MS = 25;

const ids = ['cart', 'web', 'batch'].map((sa) => `spiffe://${TD}/ns/shop/sa/${sa}`);

interface Received {
  readonly serial: string;
  readonly notAfter: number;
  readonly receivedAt: number;
}

/** Collects an X509-SVID stream's messages with when they arrived. */
class Recorder {
  readonly received: Received[] = [];
  ended: ServiceError | 'ok' | undefined;
  constructor(readonly stream: ClientReadableStream<X509SvidResponse>) {
    stream.on('data', (m: X509SvidResponse) => {
      const leaf = new X509Certificate(splitDerCertificates(m.svids[0]!.x509_svid)[0]!);
      this.received.push({ serial: leaf.serialNumber.toLowerCase(), notAfter: Date.parse(leaf.validTo), receivedAt: Date.now() });
    });
    stream.on('error', (e: ServiceError) => (this.ended = e));
    stream.on('end', () => (this.ended ??= 'ok'));
  }
}

describe('CA outage end to end (real time, short-lived certificates)', () => {
  let stack: Stack;
  let broker: Broker;
  let consumer: Svid;
  let client: BrokerClient;
  const uids = new Map<string, string>();

  const newClient = () =>
    new BrokerClient({
      socketPath: broker.brokerSocketPath,
      rootsPem: stack.ca.rootsPem(),
      certChainPem: consumer.certChainPem,
      privateKeyPem: consumer.privateKeyPem,
      trustDomain: TD,
    });
  const probe = () => probeHandshake(broker.brokerSocketPath, { rootsPem: stack.ca.rootsPem(), ...consumer });
  const ops = (path: string) => fetch(`http://127.0.0.1:${broker.opsPort}${path}`);
  const allReady = () => ids.every((id) => broker.certs.current(id)) && broker.ownSvid().state === 'ready';

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'ca-outage-e2e-', namespaces: ['shop'], serviceAccounts: ['shop/cart', 'shop/web', 'shop/batch'] });
    broker = await startBroker(
      stack.brokerConfig({
        certTtlSeconds: CERT_TTL_SECONDS,
        ...(process.env.BROKER_TEST_DEBUG ? { logger: createLogger({ level: 'debug' }) } : {}),
      }),
    );
    for (const sa of ['cart', 'web', 'batch']) {
      uids.set(sa, await stack.createPod({ namespace: 'shop', name: `${sa}-0`, serviceAccount: sa, nodeName: NODE }));
    }
    await broker.whenReady(AbortSignal.timeout(20_000));
    await eventually('every identity ready', () => allReady() || undefined);
    consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    client = newClient();
  });

  after(async () => {
    client?.close();
    await broker?.stop(500);
    await stack?.close();
  });

  it('while the CA is down nothing expired is presented or handed out; once it is back, every identity and the own SVID are ready within the bound', async (t) => {
    const rec = new Recorder(client.subscribeX509Svid({ uid: uids.get('cart')! }));
    await eventually('first message', () => rec.received.length >= 1 || undefined);

    await stack.stopCa();
    const stoppedAt = Date.now();

    // Every certificate expires (at most one TTL after the last refresh) and is dropped.
    const expiryTries = Math.ceil(((CERT_TTL_SECONDS + 10) * 1000) / POLL_MS);
    await eventually(
      'every certificate and the own SVID expired',
      () => (ids.every((id) => broker.certs.status(id)?.state === 'expired') && broker.ownSvid().state === 'expired') || undefined,
      expiryTries,
    );
    const own = broker.ownSvid();
    assert.ok(own.notAfter !== undefined && own.notAfter <= Date.now());

    // Readiness and metrics say so truthfully.
    const readyz = await ops('/readyz');
    assert.equal(readyz.status, 503);
    assert.match(await readyz.text(), new RegExp(`own SVID expired at ${new Date(own.notAfter).toISOString().replace(/\./g, '\\.')}, renewing`));
    const metrics = await (await ops('/metrics')).text();
    assert.match(metrics, /certbroker_broker_own_svid_state\{state="expired"\} 1/);
    assert.match(metrics, /certbroker_broker_own_svid_state\{state="ready"\} 0/);
    assert.match(metrics, /certbroker_broker_pod_certificate_states\{state="expired"\} 3/);
    for (const id of ids) assert.match(metrics, new RegExp(`certbroker_broker_certificate_expiry_timestamp_seconds\\{identity="${id}"\\} \\d`));

    // The Broker API presents nothing (no TLS handshake completes) and hands out nothing.
    const during = await probe();
    assert.equal(during.ok, false, `a handshake completed with serial ${during.ok ? during.serial : ''} valid to ${during.ok ? new Date(during.validTo).toISOString() : ''}`);
    const lateClient = newClient();
    try {
      await assert.rejects(firstMessage(lateClient.subscribeX509Svid({ uid: uids.get('web')! })), (err: ServiceError) => err.code === GrpcStatus.UNAVAILABLE);
    } finally {
      lateClient.close();
    }

    // The outage goes on until backoffs had time to grow, then the CA comes back right after a
    // failed try of the own SVID.
    const ownStatus = () => broker.ownCerts.status(broker.ownIdentity)!;
    let failures = ownStatus().consecutiveFailures;
    await eventually(
      'a failed own-SVID try after the minimum outage',
      () => {
        const now = ownStatus().consecutiveFailures;
        const justFailed = now > failures;
        failures = now;
        return (Date.now() - stoppedAt >= MIN_OUTAGE_MS && justFailed) || undefined;
      },
      Math.ceil((MIN_OUTAGE_MS + 160_000) / POLL_MS),
    );
    const backAt = Date.now();
    await stack.restartCa();
    const caReadyAt = Date.now();

    await eventually('every identity and the own SVID ready again', () => allReady() || undefined, Math.ceil(RECOVERY_BOUND_MS / POLL_MS));
    const readyAt = Date.now();
    t.diagnostic(
      `outage ${backAt - stoppedAt} ms; CA restart took ${caReadyAt - backAt} ms; everything ready ${readyAt - caReadyAt} ms after the CA was ready (${readyAt - backAt} ms after its restart began)`,
    );

    // Serving again: a handshake presents a valid SVID, readiness is back, consumers are served.
    const served = await probe();
    assert.ok(served.ok, `no handshake after recovery: ${served.ok ? '' : served.error}`);
    assert.ok(served.validTo > Date.now());
    assert.equal((await ops('/readyz')).status, 200);
    const fresh = newClient();
    try {
      const msg = await firstMessage(fresh.subscribeX509Svid({ uid: uids.get('web')! }));
      assert.equal(msg.svids[0]!.spiffe_id, ids[1]);
    } finally {
      fresh.close();
    }
    const before = rec.received.length;
    await eventually('the open stream got the renewed certificate', () => rec.received.length > before || undefined);
    assert.equal(rec.ended, undefined, 'the stream opened before the outage stayed open');
    for (const r of rec.received) assert.ok(r.notAfter > r.receivedAt, `stream got serial ${r.serial}, already expired on arrival`);
  });
});
