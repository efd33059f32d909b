/**
 * The Istio CA front relays a CA that sheds load as the CA said it: RESOURCE_EXHAUSTED with the
 * CA's retry pushback (gRFC A6 `grpc-retry-pushback-ms`), not UNAVAILABLE without one, so a
 * client that honours pushback (grpc-go with a retry policy) waits as long as the CA asked. The
 * real CA (its CA_MAX_STREAMS at 2, both held by calls whose bodies never come) behind the real
 * broker and front, each on the default h2 engine; the front's counter says ERR_FRONT_CA_BUSY.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { startBroker, type Broker } from '../../src/broker/index.js';
import { parseRetryPushbackMs, RETRY_PUSHBACK_METADATA } from '../../src/grpc/index.js';
import { ERROR_CODE_METADATA } from '../../src/protocol/grpc-status.js';
import { newCsr } from '../ca/support/pki-fixtures.js';
import { rawCaSession, requestFrame, type RawCaSession } from '../ca/support/raw-grpc.js';
import { until } from '../support/until.js';
import { frontConfig } from './support/front-config.js';
import { BROKER_NS, NODE, Stack } from './support/stack.js';

describe('Istio CA front: a CA shedding load', () => {
  let stack: Stack;
  let broker: Broker;
  let holder: RawCaSession;

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'front-pushback-', namespaces: [], serviceAccounts: [], ca: { limits: { maxStreams: 2, requestBodyTimeoutMs: 20_000 } } });
    await stack.createPod({ namespace: BROKER_NS, name: 'ztunnel-local', serviceAccount: 'ztunnel', nodeName: NODE });
    broker = await startBroker({ ...stack.brokerConfig({}), istioCaFront: frontConfig() });
    await broker.whenReady(AbortSignal.timeout(20_000));
  });

  after(async () => {
    holder?.close();
    await broker?.stop(500);
    await stack?.close();
  });

  it('is answered RESOURCE_EXHAUSTED with the CA\'s pushback; once the CA has room the same call is issued', async () => {
    const token = (await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-local')).reveal();
    const front = rawCaSession({ port: broker.istioCaFrontPort!, rootsPem: () => stack.ca.rootsPem() });
    try {
      const body = requestFrame({ csr: await newCsr() });
      const auth = { authorization: `Bearer ${token}` };
      // The front's first call also opens its kept session to the CA, while it has room.
      assert.equal((await front.call(auth, body)).grpc, status.OK, 'issued while the CA has room');
      // Both of the CA's stream slots held by calls whose request bodies never come.
      holder = rawCaSession(stack.ca);
      const held = [holder.call({}, undefined, { open: true }), holder.call({}, undefined, { open: true })];
      await until(async () => (await stack.ca.metrics.openStreams.get()).values[0]?.value === 2, 'the two held streams open at the CA');
      const shed = await front.call(auth, body);
      assert.equal(shed.grpc, status.RESOURCE_EXHAUSTED, JSON.stringify(shed.metadata));
      const pushback = parseRetryPushbackMs(shed.metadata[RETRY_PUSHBACK_METADATA]);
      assert.ok(pushback !== undefined && pushback > 0, `the CA's pushback relayed: ${JSON.stringify(shed.metadata)}`);
      assert.equal(shed.metadata[ERROR_CODE_METADATA], 'ERR_FRONT_CA_BUSY');
      const text = await broker.metrics.registry.getSingleMetricAsString('certbroker_broker_istio_ca_front_requests_total');
      assert.match(text, /outcome="limited",reason="ERR_FRONT_CA_BUSY"\} 1/, text);
      holder.close();
      await Promise.all(held);
      await until(async () => (await stack.ca.metrics.openStreams.get()).values[0]?.value === 0, 'the held streams closed at the CA');
      assert.equal((await front.call(auth, body)).grpc, status.OK, 'issued again once the CA has room');
    } finally {
      front.close();
    }
  });
});
