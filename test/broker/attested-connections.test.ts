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
  cgroupAnchors,
  ConnectionAttestor,
  ownCgroup,
  PerlPeerCredentials,
  ProcessAttestor,
  procfsReader,
  type PeerCredentials,
  type PeerCredentialsSource,
} from '../../src/broker/attestation/index.js';
import { AttestedConnections, BrokerError } from '../../src/broker/index.js';
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
    new ConnectionAttestor({ peers, processes: new ProcessAttestor(procfsReader(), cgroupAnchors(ownCgroup())) }),
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
