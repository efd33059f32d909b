/**
 * The broker's node pod watch when the API server's watch goes silent (a hung replica or
 * proxy: the connection stays open, nothing comes), end to end: devcluster over HTTPS, the real
 * CA, the Broker API over its Unix socket. While silent, a deleted pod is still served and a new
 * one is unknown; the idle watchdog re-opens the watch from the last resourceVersion, after
 * which the deleted pod's stream ends and the new pod is served. With every watch silent and
 * lists failing, /readyz reports the stale watch; it recovers when the API answers again.
 * The broker's clock is a SkipClock: the watchdog fires when the test skips time.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { type Broker, BrokerClient, firstMessage, startBroker } from '../../src/broker/index.js';
import { createLogger } from '../../src/core/log.js';
import { SkipClock } from '../support/skip-clock.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD } from './support/stack.js';
import { eventually } from './support/eventually.js';

const IDLE_MS = 1000;
const cartId = `spiffe://${TD}/ns/shop/sa/cart`;
const webId = `spiffe://${TD}/ns/shop/sa/web`;
/** The broker's watch, and only it (the CA watches all pods, without a field selector). */
const brokerWatch = { path: '/api/v1/pods', onlyWatch: true, query: { fieldSelector: `spec.nodeName=${NODE}` } };
const brokerList = { path: '/api/v1/pods', exceptWatch: true, query: { fieldSelector: `spec.nodeName=${NODE}` } };

describe('broker node pod watch against a silent API server', () => {
  let stack: Stack;
  let clock: SkipClock;
  let broker: Broker;
  let client: BrokerClient;
  const logs: string[] = [];

  before(async () => {
    // Bookmarks every 100 ms: a healthy watch is never idle for the watchdog's 1 s.
    stack = await Stack.start({ tmpPrefix: 'broker-watch-', namespaces: ['shop'], serviceAccounts: ['shop/cart', 'shop/web'], bookmarkIntervalMs: 100 });
    clock = new SkipClock();
    const logger = createLogger({ level: 'debug', sink: (l) => logs.push(l) });
    broker = await startBroker(stack.brokerConfig({ clock, logger, informer: { idleTimeoutMs: IDLE_MS, initialBackoffMs: 50, maxBackoffMs: 200 } }));
    await broker.whenReady(AbortSignal.timeout(20_000));
    const consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    client = new BrokerClient({
      socketPath: broker.brokerSocketPath,
      rootsPem: stack.ca.rootsPem(),
      certChainPem: consumer.certChainPem,
      privateKeyPem: consumer.privateKeyPem,
      trustDomain: TD,
    });
  });

  after(async () => {
    stack?.dc.faults.clear();
    client?.close();
    await broker?.stop(500);
    await stack?.close();
  });

  const readyz = async () => {
    const r = await fetch(`http://127.0.0.1:${broker.opsPort}/readyz`);
    return { status: r.status, body: await r.text() };
  };

  it('a deleted pod stops being served and a new pod is found once the watchdog re-opens the silent watch', async () => {
    const oldUid = await stack.createPod({ namespace: 'shop', name: 'old-0', serviceAccount: 'cart', nodeName: NODE });
    await eventually('cart identity ready', () => broker.certs.current(cartId));
    const oldStream = client.subscribeX509Svid({ uid: oldUid });
    let oldEnded: ServiceError | 'end' | undefined;
    oldStream.on('error', (e: ServiceError) => (oldEnded = e));
    oldStream.on('end', () => (oldEnded ??= 'end'));
    assert.equal((await firstMessage(oldStream)).svids[0]!.spiffe_id, cartId);

    // The replica behind the broker's watch hangs.
    await eventually('the broker watch, silenced', () => stack.dc.faults.silenceWatches({ match: brokerWatch }) > 0 || undefined);
    await stack.deletePod('shop', 'old-0');
    const newUid = await stack.createPod({ namespace: 'shop', name: 'new-0', serviceAccount: 'web', nodeName: NODE });
    assert.ok(broker.pods.byUid(oldUid), 'while silent, the deleted pod is still known');
    await assert.rejects(firstMessage(client.subscribeX509Svid({ uid: newUid })), (e: unknown) => (e as ServiceError).code === GrpcStatus.NOT_FOUND);

    clock.skip(IDLE_MS);
    await eventually('the deleted pod dropped', () => broker.pods.byUid(oldUid) === undefined || undefined);
    await eventually('its stream ended', () => oldEnded);
    await eventually('the new pod known', () => broker.pods.byUid(newUid));
    const fresh = client.subscribeX509Svid({ uid: newUid });
    assert.equal((await firstMessage(fresh)).svids[0]!.spiffe_id, webId);
    fresh.cancel();
    assert.ok(logs.some((l) => l.includes('"msg":"watch silent (no event or bookmark), re-watching"')));
    const metrics = await (await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`)).text();
    assert.match(metrics, /certbroker_informer_restarts_total\{resource="pods",cluster="",reason="watchdog"\} [1-9]/);
    assert.equal((await readyz()).status, 200);
  });

  it('every watch silent and lists failing: /readyz reports the stale pod watch, then recovers', async () => {
    stack.dc.faults.silenceWatches({ match: brokerWatch, newWatches: 1_000_000 });
    stack.dc.faults.failWith500(1_000_000, { match: brokerList });
    let stale: { status: number; body: string } | undefined;
    for (let i = 0; i < 400 && !stale; i++) {
      clock.skip(IDLE_MS / 2);
      const r = await readyz();
      if (r.body.includes('watch stale')) stale = r;
      else await new Promise((res) => setTimeout(res, 20));
    }
    assert.ok(stale, 'readiness reported the stale watch');
    assert.equal(stale.status, 503);
    assert.match(stale.body, /\[-\]pod-watch failed: pods watch stale: no list, event or bookmark for [\d.]+ s \(watchdog 1 s, \d+ watchdog restarts\)/);
    assert.equal(broker.ready, false);
    const metrics = await (await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`)).text();
    assert.match(metrics, /^certbroker_informer_ready\{resource="pods",cluster=""\} 0$/m, 'the metric shows the stale watch');

    stack.dc.faults.clear();
    await eventually('ready again', async () => {
      clock.skip(100);
      return (await readyz()).status === 200 || undefined;
    });
    assert.equal(broker.ready, true);
  });
});
