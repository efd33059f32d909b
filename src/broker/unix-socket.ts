/** The broker's two listening Unix sockets (Broker API, CNI registrations) share their set-up. */
import { mkdirSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';

/** Makes the socket's directory and removes a stale socket left by a previous run. */
export function prepareSocketPath(socketPath: string): void {
  mkdirSync(dirname(socketPath), { recursive: true });
  rmSync(socketPath, { force: true });
}
