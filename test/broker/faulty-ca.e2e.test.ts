/**
 * The broker against a faulty external CA (test/broker/support/faulty-ca.ts: a real
 * IstioCertificateService over TLS on loopback that signs leaves with a chosen, broken profile),
 * with the devcluster over HTTPS for the pod watch. A CA answer whose leaf is not an X509-SVID
 * (CA:TRUE, keyCertSign, cRLSign, no digitalSignature) is a failed fetch: nothing is served for
 * it, a still-valid certificate keeps being served, the coded error is logged and counted.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Broker, BrokerClient, firstMessage, IstioCaClient, startBroker, workloadCertPem } from '../../src/broker/index.js';
import { createLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { x509SvidProblems } from '../../src/spiffe/index.js';
import { eventually } from './support/eventually.js';
import { leafOf, SvidRecorder } from './support/svid-recorder.js';
import { FaultyCa, type LeafProfile } from './support/faulty-ca.js';
import { SkipClock } from '../support/skip-clock.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD } from './support/stack.js';

const BAD: readonly LeafProfile[] = ['ca-true', 'key-cert-sign', 'crl-sign', 'no-digital-signature'];
const MINUTE = 60_000;

describe('broker against a CA that returns leaves breaking the X509-SVID rules', () => {
  let stack: Stack;
  let fca: FaultyCa;
  let clock: SkipClock;
  let broker: Broker;
  let client: BrokerClient;
  const logs: string[] = [];

  const caErrors = async (code: string): Promise<number> => {
    const text = await broker.metrics.registry.metrics();
    const line = text.split('\n').find((l) => l.startsWith(`certbroker_broker_ca_errors_total{code="${code}"}`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-faulty-ca-', namespaces: ['shop'], serviceAccounts: ['shop/cart', ...BAD.map((p) => `shop/${p}`)] });
    fca = await FaultyCa.start();
    clock = new SkipClock();
    const config = stack.brokerConfig({ clock, logger: createLogger({ level: 'info', sink: (l) => logs.push(l) }), name: 'faulty' });
    broker = await startBroker({ ...config, ca: { ...config.ca, address: `127.0.0.1:${fca.port}`, rootsPem: fca.rootsPem, tlsServerName: 'localhost' } });
    await broker.whenReady(AbortSignal.timeout(20_000));
    // The consumer's own SVID, from the same CA (a correct profile).
    const ownCa = new IstioCaClient({
      address: `127.0.0.1:${fca.port}`,
      caRootsPem: fca.rootsPem,
      tlsServerName: 'localhost',
      tokens: { token: async () => new Secret('unused') },
      clusterId: 'Kubernetes',
      certTtlSeconds: 3600,
      impersonate: false,
    });
    const consumer = await ownCa.fetchCertificate(`spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`, new AbortController().signal);
    ownCa.close();
    const pem = workloadCertPem(consumer);
    client = new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: fca.rootsPem, certChainPem: pem.certChainPem, privateKeyPem: pem.privateKeyPem, trustDomain: TD });
  });

  after(async () => {
    client?.close();
    await broker?.stop(500);
    await fca?.stop();
    await stack?.close();
  });

  it('serves nothing for a leaf with CA:TRUE, keyCertSign, cRLSign or without digitalSignature; the fetch fails coded, logged and counted', async () => {
    const recorders = new Map<LeafProfile, SvidRecorder>();
    for (const profile of BAD) {
      fca.profiles.set(`spiffe://${TD}/ns/shop/sa/${profile}`, profile);
      const uid = await stack.createPod({ namespace: 'shop', name: `${profile}-0`, serviceAccount: profile, nodeName: NODE });
      await eventually(`${profile} pod tracked`, () => broker.pods.byUid(uid));
      recorders.set(profile, new SvidRecorder(client.subscribeX509Svid({ uid })));
    }
    for (const profile of BAD) {
      const id = `spiffe://${TD}/ns/shop/sa/${profile}`;
      const status = await eventually(`${profile} fetch failed`, () => {
        const s = broker.certs.status(id);
        return s && s.consecutiveFailures > 0 ? s : undefined;
      });
      assert.equal(status.state, 'failed');
      assert.match(status.lastError ?? '', /^ERR_CA_LEAF_NOT_SVID: /, profile);
      assert.equal(broker.certs.current(id), undefined, `${profile}: nothing to serve`);
      assert.ok(logs.some((l) => l.includes('certificate fetch failed') && l.includes(id) && l.includes('ERR_CA_LEAF_NOT_SVID')), `${profile}: logged with its code`);
    }
    const expected: Record<string, string> = { 'ca-true': 'ERR_SVID_LEAF_IS_CA', 'key-cert-sign': 'ERR_SVID_LEAF_KEY_CERT_SIGN', 'crl-sign': 'ERR_SVID_LEAF_CRL_SIGN', 'no-digital-signature': 'ERR_SVID_KEY_USAGE_NO_DIGITAL_SIGNATURE' };
    for (const profile of BAD) assert.match(broker.certs.status(`spiffe://${TD}/ns/shop/sa/${profile}`)!.lastError!, new RegExp(expected[profile]!));
    assert.ok((await caErrors('ERR_CA_LEAF_NOT_SVID')) >= BAD.length);
    for (const [profile, rec] of recorders) {
      assert.equal(rec.messages.length, 0, `${profile}: the stream got no certificate`);
      assert.equal(rec.ended, undefined, `${profile}: the stream keeps waiting for a good one`);
    }

    // Once the CA answers correctly, the waiting stream gets a valid X509-SVID (after the backoff).
    fca.profiles.set(`spiffe://${TD}/ns/shop/sa/ca-true`, 'svid');
    const rec = recorders.get('ca-true')!;
    await eventually('served after the CA is fixed', () => {
      clock.skip(1000);
      return rec.messages[0];
    });
    assert.deepEqual(x509SvidProblems(new Uint8Array(leafOf(rec.messages[0]!).raw)).problems, []);
    for (const r of recorders.values()) r.stream.cancel();
  });

  it('keeps serving the valid certificate when a refresh brings a bad leaf', async () => {
    const id = `spiffe://${TD}/ns/shop/sa/cart`;
    const uid = await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    await eventually('cart tracked', () => broker.pods.byUid(uid));
    const rec = new SvidRecorder(client.subscribeX509Svid({ uid }));
    const first = await eventually('first message', () => rec.messages[0]);
    const serial = leafOf(first).serialNumber.toLowerCase();
    const failuresBefore = await caErrors('ERR_CA_LEAF_NOT_SVID');

    fca.profiles.set(id, 'key-cert-sign');
    const requestsBefore = fca.requests.filter((r) => r === id).length;
    clock.skip(40 * MINUTE); // past the half-life refresh of the 1 h certificate, well before it expires
    await eventually('refresh failed', () => (broker.certs.status(id)?.consecutiveFailures ?? 0) > 0 || undefined);
    assert.ok(fca.requests.filter((r) => r === id).length > requestsBefore, 'the refresh reached the CA');
    assert.match(broker.certs.status(id)!.lastError ?? '', /^ERR_CA_LEAF_NOT_SVID: .*ERR_SVID_LEAF_KEY_CERT_SIGN/);
    assert.equal(broker.certs.current(id)?.serial, serial, 'the valid certificate is still held');
    assert.ok((await caErrors('ERR_CA_LEAF_NOT_SVID')) > failuresBefore);

    const again = await firstMessage(client.subscribeX509Svid({ uid }));
    assert.equal(leafOf(again).serialNumber.toLowerCase(), serial, 'a new subscriber gets the valid certificate');
    assert.equal(rec.messages.length, 1, 'the open stream got no update with the bad leaf');
    assert.equal(rec.ended, undefined);
    rec.stream.cancel();
  });
});
