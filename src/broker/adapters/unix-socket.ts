/** The broker's two listening Unix sockets (Broker API, CNI registrations) share their set-up. */
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { ensurePrivateDirSync } from '../../ops/private-dir.js';

/**
 * Makes the socket's directory (and missing parents) owner-only, 0700 whatever the umask (an
 * existing directory keeps its mode), and removes a stale socket left by a previous run.
 */
export function prepareSocketPath(socketPath: string): void {
  ensurePrivateDirSync(dirname(socketPath));
  rmSync(socketPath, { force: true });
}
