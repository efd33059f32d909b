/**
 * AttestedConnections (fronts/workload-api): a connection's attestation is found by the peer tag
 * grpc-js reports; one that could not be made (`unavailable`) is made again on the next call, an
 * answer is kept. Real sockets, real SO_PEERCRED through Perl, the real /proc; the peer source
 * fails its first read, as a Perl start that timed out would.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import {
  ConnectionAttestor,
  nodeProcessAttestor,
  PerlPeerCredentials,
  type PeerCredentials,
  type PeerCredentialsSource,
} from '../../src/broker/attestation/index.js';
import { AttestedConnections, BrokerError, ConnectionLimits } from '../../src/broker/index.js';
import { Scratch } from '../support/scratch.js';

/** The real source, except that its first read fails. */
class FailsFirst implements PeerCredentialsSource {
  readonly #real = new PerlPeerCredentials();
  reads = 0;
  read(socket: Socket): Promise<PeerCredentials> {
    this.reads++;
    if (this.reads === 1) return Promise.reject(new BrokerError('ERR_ATTESTATION_UNAVAILABLE', 'perl did not answer', { status: 'unavailable' }));
    return this.#real.read(socket);
  }
}

test('an attestation that could not be made is made again by the next call on the connection; an answer is final', async (t) => {
  const dir = Scratch.forTest(t, 'cb-attested-').dir;
  const path = join(dir, 's.sock');
  const peers = new FailsFirst();
  const connections = new AttestedConnections(
    new ConnectionAttestor({ peers, processes: nodeProcessAttestor() }),
  );
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) =>
    server.on('connection', (s) => {
      connections.accept(s);
      resolve(s);
    }),
  );
  await new Promise<void>((r) => server.listen(path, r));
  const client = connect(path);
  t.after(async () => {
    client.destroy();
    (await accepted).destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const socket = await accepted;
  const tag = socket.remoteAddress!;
  assert.match(tag, /^workload-api-connection-\d+$/, 'the tag grpc-js reports as the peer');
  assert.equal(connections.attestationOf('workload-api-connection-0'), undefined, 'unknown peers have none');

  // The attestation made at accept failed (the peer source's first read); the call makes it again.
  const first = await connections.attestationOf(tag)!;
  assert.ok(!first.ok && first.reason === 'not-in-pod', JSON.stringify(first));
  assert.ok('peer' in first && first.peer.pid === process.pid, 'this process connected');
  assert.equal(peers.reads, 2);
  const again = await connections.attestationOf(tag)!;
  assert.equal(again, first, 'an answer is kept for the connection');
  assert.equal(peers.reads, 2);
  socket.destroy();
  await new Promise((r) => socket.once('close', r));
  assert.equal(connections.attestationOf(tag), undefined, 'forgotten when the socket closes');
  assert.equal(connections.size, 0);
});

test('bounds: past the socket bound a connection is closed at accept; past its caller bound (a PID outside pods) its calls are refused; closing frees both', async (t) => {
  const dir = Scratch.forTest(t, 'cb-attested-').dir;
  const path = join(dir, 'b.sock');
  const limited: string[] = [];
  const limits = new ConnectionLimits({ maxConnections: 3, maxConnectionsPerCaller: 2, maxStreams: 10, maxStreamsPerCaller: 5 }, { limited: (l) => limited.push(l) });
  const connections = new AttestedConnections(new ConnectionAttestor({ peers: new PerlPeerCredentials(), processes: nodeProcessAttestor() }), limits);
  const accepted: Array<{ socket: Socket; admitted: boolean }> = [];
  const waiting: Array<() => void> = [];
  const server = createServer((s) => {
    s.on('error', () => undefined);
    accepted.push({ socket: s, admitted: connections.accept(s) });
    waiting.shift()?.();
  });
  await new Promise<void>((r) => server.listen(path, r));
  const clients: Socket[] = [];
  t.after(async () => {
    for (const c of clients) c.destroy();
    for (const a of accepted) a.socket.destroy();
    await new Promise<void>((r) => server.close(() => r()));
  });
  const open = async () => {
    const arrived = new Promise<void>((r) => waiting.push(r));
    const c = connect(path);
    c.on('error', () => undefined);
    clients.push(c);
    await arrived;
    return accepted.at(-1)!;
  };
  const [one, two, three] = [await open(), await open(), await open()];
  const fourth = await open();
  assert.deepEqual([one, two, three, fourth].map((a) => a.admitted), [true, true, true, false]);
  assert.ok(fourth.socket.destroyed, 'closed at accept');
  assert.deepEqual(limited, ['connections']);
  const attested = await Promise.all([one, two, three].map((a) => connections.attestationOf(a.socket.remoteAddress!)!));
  assert.ok(attested.every((a) => !a.ok && a.reason === 'not-in-pod'), 'this process is in no pod: its PID is the caller');
  const refusals = [one, two, three].map((a) => connections.limitOf(a.socket.remoteAddress!));
  assert.equal(refusals.filter((r) => r === undefined).length, 2);
  const refused = refusals.find((r) => r !== undefined)!;
  assert.equal(refused.code, 'ERR_WORKLOAD_API_LIMIT');
  assert.equal(refused.status, 'resource-exhausted');
  assert.match(refused.message, new RegExp(`pid:${process.pid} has 2 open \\(at most 2\\)`));
  assert.deepEqual(limits.held(`pid:${process.pid}`), { connections: 2, streams: 0 });
  assert.equal(limits.held().connections, 3);

  one.socket.destroy();
  await new Promise((r) => one.socket.once('close', r));
  assert.deepEqual(limits.held(`pid:${process.pid}`), { connections: 1, streams: 0 }, 'released on close');
  const five = await open();
  assert.ok(five.admitted, 'the socket bound has room again');
  await connections.attestationOf(five.socket.remoteAddress!);
  assert.equal(connections.limitOf(five.socket.remoteAddress!), undefined, 'and the caller bound');
});

test('ConnectionLimits: stream slots per caller and in total, each released once', () => {
  const limited: string[] = [];
  const limits = new ConnectionLimits({ maxConnections: 10, maxConnectionsPerCaller: 10, maxStreams: 3, maxStreamsPerCaller: 2 }, { limited: (l) => limited.push(l) });
  const a1 = limits.stream('pod:a');
  limits.stream('pod:a');
  assert.throws(() => limits.stream('pod:a'), (e: unknown) => e instanceof BrokerError && e.code === 'ERR_WORKLOAD_API_LIMIT' && /streams-per-caller/.test(e.message));
  limits.stream('pod:b');
  assert.throws(() => limits.stream('pod:c'), (e: unknown) => e instanceof BrokerError && e.status === 'resource-exhausted' && /3 streams open \(at most 3\)/.test(e.message));
  a1();
  a1();
  assert.deepEqual(limits.held(), { connections: 0, streams: 2 }, 'a release counts once');
  assert.deepEqual(limits.held('pod:a'), { connections: 0, streams: 1 });
  limits.stream('pod:c');
  assert.deepEqual(limited, ['streams-per-caller', 'streams']);
});
