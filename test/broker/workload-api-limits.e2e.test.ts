/**
 * The Workload API's bounds end to end (WORKLOAD_API_MAX_*): two real brokers (devcluster over
 * HTTPS, the CA over TLS), one with tight connection bounds and one with tight stream bounds;
 * each caller a real Python grpcio process in a real kubelet-style pod cgroup holding its stream
 * open. Past a caller's bound: RESOURCE_EXHAUSTED; past the socket's connection bound: the
 * connection is closed at accept (the client sees UNAVAILABLE); a slot freed is usable again.
 * Root only (cgroups).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { join } from 'node:path';
import { type Broker, startBroker, WORKLOAD_API_DEFAULTS } from '../../src/broker/index.js';
import { KubeletCgroups, kubeCgroupsProblem } from '../../src/cli/kube-cgroups.js';
import { pythonGrpcMissing } from '../support/tools.js';
import { eventually } from './support/eventually.js';
import { containerCgroup, generatePythonStubs, PythonWorkloads } from './support/python-workload.js';
import { NODE, Stack, TD } from './support/stack.js';

const cgroups = KubeletCgroups.v2();
const skip = kubeCgroupsProblem(cgroups, 'cgroup v2') ?? pythonGrpcMissing();

async function metric(broker: Broker, pattern: RegExp): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`)).text();
  const m = pattern.exec(text);
  return m ? Number(m[1]) : undefined;
}

describe('Workload API bounds: per caller and per socket, connections and streams', { skip }, () => {
  let stack: Stack;
  let connBroker: Broker;
  let streamBroker: Broker;
  let conn: PythonWorkloads;
  let streams: PythonWorkloads;
  const uid: Record<string, string> = {};

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'wlapi-limits-', namespaces: ['shop'], serviceAccounts: ['shop/app'] });
    // Idle connections (no call open) close after 2 s here; the held streams keep theirs open.
    const start = (name: string, limits: (typeof WORKLOAD_API_DEFAULTS)['limits']) =>
      startBroker({ ...stack.brokerConfig({ name }), workloadApiSocketPath: join(stack.dir, name, 'wl', 'socket'), workloadApi: { ...WORKLOAD_API_DEFAULTS, limits, idleConnectionSeconds: 2 } });
    connBroker = await start('conn', { maxConnections: 4, maxConnectionsPerCaller: 2, maxStreams: 100, maxStreamsPerCaller: 50 });
    streamBroker = await start('streams', { maxConnections: 100, maxConnectionsPerCaller: 50, maxStreams: 3, maxStreamsPerCaller: 2 });
    await Promise.all([connBroker.whenReady(AbortSignal.timeout(20_000)), streamBroker.whenReady(AbortSignal.timeout(20_000))]);
    for (const name of ['a', 'b', 'c', 'd', 's0', 's1', 's2']) uid[name] = await stack.createPod({ namespace: 'shop', name, serviceAccount: 'app', nodeName: NODE });
    const identity = `spiffe://${TD}/ns/shop/sa/app`;
    await eventually('pods and certificate', () => [connBroker, streamBroker].every((b) => b.pods.byUid(uid['s2']!) && b.certs.current(identity)) || undefined);
    const stubs = join(stack.dir, 'py');
    await generatePythonStubs(stubs);
    conn = new PythonWorkloads(cgroups!, stubs, `unix://${connBroker.workloadApiSocketPath}`);
    streams = new PythonWorkloads(cgroups!, stubs, `unix://${streamBroker.workloadApiSocketPath}`);
  });

  after(async () => {
    await conn?.killAll();
    await streams?.killAll();
    cgroups?.cleanup();
    await connBroker?.stop(500);
    await streamBroker?.stop(500);
    await stack?.close();
  });

  const holding = (w: PythonWorkloads, pod: string) => w.start('x509svid', { cgroup: containerCgroup(uid[pod]!), count: 2 });

  it('connections: a third of one pod answers RESOURCE_EXHAUSTED; another pod is served; past 4 the connection is closed at accept; a freed slot serves again', async () => {
    const a1 = holding(conn, 'a');
    const a2 = holding(conn, 'a');
    assert.equal((await a1.line(0)).code, undefined);
    assert.equal((await a2.line(0)).code, undefined);
    const a3 = await holding(conn, 'a').line(0);
    assert.equal(a3.code, 'RESOURCE_EXHAUSTED', JSON.stringify(a3));
    assert.match(a3.details ?? '', /connections-per-caller/);
    assert.equal((await holding(conn, 'b').line(0)).code, undefined, 'another pod is another caller');
    // The refused client exits; once its connection is gone, one slot is left.
    await eventually('3 connections open', async () => ((await metric(connBroker, /^certbroker_broker_workload_api_connections_open (\d+)$/m)) === 3 ? true : undefined));
    assert.equal((await holding(conn, 'c').line(0)).code, undefined);
    const d = await holding(conn, 'd').line(0);
    assert.equal(d.code, 'UNAVAILABLE', `closed at accept: ${JSON.stringify(d)}`);
    assert.ok(((await metric(connBroker, /^certbroker_broker_workload_api_limited_total\{limit="connections"\} (\d+)$/m)) ?? 0) >= 1);
    assert.ok(((await metric(connBroker, /^certbroker_broker_workload_api_limited_total\{limit="connections-per-caller"\} (\d+)$/m)) ?? 0) >= 1);

    await a1.kill();
    await eventually('a slot freed', async () => ((await metric(connBroker, /^certbroker_broker_workload_api_connections_open (\d+)$/m)) === 3 ? true : undefined));
    assert.equal((await holding(conn, 'a').line(0)).code, undefined, "pod a's freed slot serves again");
  });

  it('streams: a third stream of one pod answers RESOURCE_EXHAUSTED; past 3 streams in all too; a freed stream serves again', async () => {
    const s1 = holding(streams, 's0');
    assert.equal((await s1.line(0)).code, undefined);
    assert.equal((await holding(streams, 's0').line(0)).code, undefined);
    const third = await holding(streams, 's0').line(0);
    assert.equal(third.code, 'RESOURCE_EXHAUSTED', JSON.stringify(third));
    assert.match(third.details ?? '', /streams-per-caller/);
    assert.equal((await holding(streams, 's1').line(0)).code, undefined);
    const over = await holding(streams, 's2').line(0);
    assert.equal(over.code, 'RESOURCE_EXHAUSTED', JSON.stringify(over));
    assert.match(over.details ?? '', /\(streams\)/);
    await s1.kill();
    await eventually('a stream freed', async () => ((await metric(streamBroker, /^certbroker_broker_workload_api_streams_open\{rpc="x509svid"\} (\d+)$/m)) === 2 ? true : undefined));
    assert.equal((await holding(streams, 's2').line(0)).code, undefined);
    assert.ok(((await metric(streamBroker, /^certbroker_broker_workload_api_limited_total\{limit="streams"\} (\d+)$/m)) ?? 0) >= 1);
  });

  it('an idle connection (never a call, not even its HTTP/2 preface) is closed and gives its slot back', async () => {
    const before = await metric(streamBroker, /^certbroker_broker_workload_api_connections_open (\d+)$/m);
    const raw = connect(streamBroker.workloadApiSocketPath!);
    raw.on('error', () => undefined).resume(); // reads what the broker sends (its SETTINGS, GOAWAY), and so its end
    const closed = new Promise((r) => raw.once('close', r));
    await new Promise((r) => raw.once('connect', r));
    await eventually('counted', async () => ((await metric(streamBroker, /^certbroker_broker_workload_api_connections_open (\d+)$/m)) === before! + 1 ? true : undefined));
    await closed;
    await eventually('slot given back', async () => ((await metric(streamBroker, /^certbroker_broker_workload_api_connections_open (\d+)$/m)) === before ? true : undefined));
  });
});
