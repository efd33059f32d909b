/**
 * A start-time proof that peer credentials work here: the broker connects to a throwaway socket
 * of its own and must find its own PID as the peer. Fails the start with the reason (no perl, an
 * unknown architecture, a seccomp profile refusing the calls) instead of refusing every workload later.
 */
import { rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { describeError } from '../../core/errors.js';
import { BrokerError } from '../errors.js';
import type { PeerCredentialsSource } from './peer-credentials.js';

export async function verifyPeerCredentials(source: PeerCredentialsSource, dir: string): Promise<void> {
  const path = join(dir, `.peercred-check-${process.pid}.sock`);
  rmSync(path, { force: true });
  const server = createServer();
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  let client: Socket | undefined;
  let peer: Socket | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, resolve);
    });
    client = connect(path);
    client.on('error', () => undefined);
    peer = await accepted;
    const creds = await source.read(peer);
    if (creds.pid !== process.pid) throw new Error(`peer PID ${creds.pid} is not the broker's own ${process.pid}`);
  } catch (err) {
    throw new BrokerError('ERR_ATTESTATION_UNAVAILABLE', `peer credentials do not work here: ${describeError(err)}`, { status: 'unavailable', cause: err });
  } finally {
    client?.destroy();
    peer?.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(path, { force: true });
  }
}
