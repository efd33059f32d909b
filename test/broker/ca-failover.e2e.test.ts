/**
 * Broker failover over CA replicas, end to end on real parts: three `certbroker ca` processes
 * (children, each on its own loopback address: 127.0.0.1, .2, .3) serve the one root of
 * istio-ca-secret; the real broker is given all three as CA_ADDRESS `ip:port,ip:port,ip:port`
 * (grpc-js' `ipv4:` resolver, no DNS server needed) and starts cold with 200 identities on its
 * node, each watched by a Broker API consumer stream from the moment the broker serves. As soon as the second CA has
 * answered a call it is SIGKILLed, mid cold start. Every identity becomes ready, every consumer
 * stream gets its SVID under the stored root and none ends with an error, and every CA's
 * `certbroker_ca_requests_total{outcome="issued"}` is above 0 (the calls spread: round robin).
 *
 * Nothing the test does runs between the broker's start and the kill but opening the streams and
 * polling the victim's metrics: the pods' UIDs are known from their creation. (Reading the 200
 * pods back after the broker was ready took 1-6 s on a loaded machine, long enough for the cold
 * start to finish first now and then; the kill then came after it and the test failed its own
 * premise, reported as the consumers' "Connection dropped" of its teardown.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import type { ServiceError } from '@grpc/grpc-js';
import { type Broker, BrokerClient, firstMessage, splitDerCertificates, startBroker } from '../../src/broker/index.js';
import { createLogger } from '../../src/core/log.js';
import { eventually } from './support/eventually.js';
import { BROKER_NS, BROKER_SA, CONSUMER_SA, NODE, Stack, TD, type Svid } from './support/stack.js';
import { startCaProcess, type CaProcess } from '../ca/support/ca-process.js';

const IDENTITIES = 200;
const NS = 'app';
const sas = Array.from({ length: IDENTITIES }, (_, i) => `sa-${String(i).padStart(3, '0')}`);
const idOf = (sa: string) => `spiffe://${TD}/ns/${NS}/sa/${sa}`;

/** Sum of a counter's samples whose labels include `match`. */
function counter(text: string, name: string, match = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name}{`) && line.includes(match)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

interface Replica {
  readonly host: string;
  readonly proc: CaProcess;
  readonly opsPort: number;
}

const metricsOf = async (r: Replica): Promise<string> => (await fetch(`http://${r.host}:${r.opsPort}/metrics`)).text();
const okCalls = async (r: Replica): Promise<number> => counter(await metricsOf(r), 'certbroker_ca_requests_total', 'outcome="issued"');

describe('broker failover over three CA replicas (cold start of 200 identities, one CA killed)', () => {
  let stack: Stack;
  let consumer: Svid;
  let rootPem: string;
  const replicas: Replica[] = [];
  const pods: { readonly sa: string; readonly uid: string }[] = [];

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'ca-failover-', namespaces: [NS], serviceAccounts: sas.map((sa) => `${NS}/${sa}`) });
    rootPem = stack.ca.rootsPem();
    consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    // The pods first: each CA's first list indexes them all (node authorization knows them from the start).
    for (let i = 0; i < sas.length; i += 20) {
      const batch = sas.slice(i, i + 20);
      const uids = await Promise.all(batch.map((sa) => stack.createPod({ namespace: NS, name: `${sa}-0`, serviceAccount: sa, nodeName: NODE })));
      pods.push(...batch.map((sa, j) => ({ sa, uid: uids[j]! })));
    }
    await stack.stopCa(); // from here on only the three processes answer; they load the same istio-ca-secret
    const kubeconfig = join(stack.dir, 'ca.kubeconfig');
    await stack.dc.writeKubeconfig(kubeconfig, { token: stack.dc.adminToken, name: 'ca' });
    const started = await Promise.allSettled(
      ['127.0.0.1', '127.0.0.2', '127.0.0.3'].map(async (host, i) => {
        const proc = await startCaProcess(stack.dir, ['--kubeconfig', kubeconfig, '--grpc-address', `${host}:0`, '--ops-address', `${host}:0`, '--no-publish-trust-bundle'], {
          POD_NAME: `ca-${i}`,
          CA_NAMESPACE: BROKER_NS,
          CA_SERVING_DNS_NAMES: 'localhost',
          CA_SIGNING_WORKERS: '0',
          CA_TRUSTED_NODE_ACCOUNTS: `${BROKER_NS}/${BROKER_SA}`,
        });
        const ops = await proc.log.waitFor((r) => r.msg === 'ops endpoint listening');
        return { host, proc, opsPort: Number(ops.port) };
      }),
    );
    for (const s of started) if (s.status === 'fulfilled') replicas.push(s.value);
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    for (const r of replicas) await eventually(`CA ${r.host} ready`, async () => ((await fetch(`http://${r.host}:${r.opsPort}/readyz`)).status === 200 ? true : undefined));
  });

  after(async () => {
    for (const r of replicas) await r.proc.stop();
    await stack?.close();
  });

  it('every identity ready and delivered, no consumer error, calls on every replica', async (t) => {
    const brokerLogs: string[] = [];
    const base = stack.brokerConfig({ logger: createLogger({ level: 'info', sink: (l) => brokerLogs.push(l) }) });
    const caAddress = replicas.map((r) => `${r.host}:${r.proc.port}`).join(',');
    const broker: Broker = await startBroker({ ...base, ca: { ...base.ca, rootsPem: rootPem, address: caAddress } });
    let client: BrokerClient | undefined;
    try {
      // A consumer connects once the broker presents its own SVID (before that no TLS handshake completes).
      await broker.whenReady(AbortSignal.timeout(60_000));
      client = new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: rootPem, certChainPem: consumer.certChainPem, privateKeyPem: consumer.privateKeyPem, trustDomain: TD });
      // Each stream's end is settled here, so a stream the teardown cuts (after a failed
      // assertion) is no unhandled rejection standing in for that assertion's message.
      const streamErrors: ServiceError[] = [];
      const delivered = pods.map(({ sa, uid }) =>
        firstMessage(client!.subscribeX509Svid({ uid })).then(
          (m) => ({ sa, m }),
          (err: ServiceError) => {
            streamErrors.push(err);
            return undefined;
          },
        ),
      );
      const victim = replicas[1]!;
      const victimOk = await eventually('the second CA answered a call', async () => {
        const n = await okCalls(victim);
        return n > 0 ? n : undefined;
      }, 1200);
      const readyAtKill = sas.filter((sa) => broker.certs.current(idOf(sa))).length;
      victim.proc.child.kill('SIGKILL');
      await victim.proc.stop();
      assert.ok(readyAtKill < IDENTITIES, `killed during the cold start (${readyAtKill} of ${IDENTITIES} ready)`);
      const results = await Promise.all(delivered);
      assert.deepEqual(streamErrors, [], 'no consumer stream ended with an error');
      const rootDer = new X509Certificate(rootPem).raw;
      for (const { sa, m } of results.filter((r) => r !== undefined)) {
        assert.equal(m.svids[0]!.spiffe_id, idOf(sa));
        const chain = splitDerCertificates(m.svids[0]!.x509_svid);
        assert.ok(new X509Certificate(chain[0]!).checkIssued(new X509Certificate(rootPem)), `${sa}: the leaf is under the stored root`);
        assert.ok(Buffer.from(m.svids[0]!.bundle).includes(rootDer), `${sa}: the stored root is in the bundle sent`);
      }
      assert.ok(sas.every((sa) => broker.certs.current(idOf(sa))), 'every identity ready in the broker');

      const spread = [victimOk, await okCalls(replicas[0]!), await okCalls(replicas[2]!)];
      t.diagnostic(`ok calls per CA (127.0.0.2 killed with ${readyAtKill}/${IDENTITIES} ready): 127.0.0.2=${spread[0]} 127.0.0.1=${spread[1]} 127.0.0.3=${spread[2]}`);
      for (const [i, n] of spread.entries()) assert.ok(n > 0, `CA ${i} answered calls`);
      const brokerMetrics = broker.opsPort ? await (await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`)).text() : '';
      // The calls the kill cut off were tried again on the other replicas inside the CA client
      // (the channel's retry policy): not one failed CA call reached the broker's own retry.
      // (A TokenReview that failed on a just-started replica under the cold-start load is not a
      // failover matter: the CA answers UNAVAILABLE 'authentication backend unavailable' and the
      // broker retries it as an outage; it is reported here, not asserted.)
      const fetchFailures = brokerLogs.filter((l) => l.includes('"certificate fetch failed"') && l.includes('"failure":"unreachable"'));
      const backend = fetchFailures.filter((l) => l.includes('authentication backend unavailable'));
      assert.deepEqual(fetchFailures.filter((l) => !backend.includes(l)), [], 'no CA call cut off by the kill reached the broker');
      assert.ok(counter(brokerMetrics, 'certbroker_broker_ca_errors_total', 'code="UNAVAILABLE"') + counter(brokerMetrics, 'certbroker_broker_ca_errors_total', 'code="DEADLINE_EXCEEDED"') <= backend.length);
      t.diagnostic(`CA authentication backend unavailable (TokenReview failed) at the broker: ${backend.length}`);
      t.diagnostic(`broker CA errors: ${brokerMetrics.split('\n').filter((l) => l.startsWith('certbroker_broker_ca_errors_total{')).join(', ') || 'none'}`);
    } catch (err) {
      for (const r of replicas) process.stderr.write(`--- CA ${r.host}\n${r.proc.log.lines.slice(-20).join('\n')}\n`);
      throw err;
    } finally {
      client?.close();
      await broker.stop(500);
    }
  });
});
