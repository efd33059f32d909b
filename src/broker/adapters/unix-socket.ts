/**
 * The broker's listening Unix sockets share their set-up. The Broker API and CNI registration
 * sockets are for one caller each (ztunnel, the CNI plugin: root on the node) and live in
 * owner-only directories; the Workload API socket is for every workload on the node, which the
 * broker tells apart by attestation, not by file permissions.
 */
import { chmodSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { ensurePrivateDirSync } from '../../ops/private-dir.js';
import { BrokerError } from '../errors.js';

/**
 * Makes the socket's directory (and missing parents) owner-only, 0700 whatever the umask (an
 * existing directory keeps its mode), and removes a stale socket left by a previous run.
 */
export function prepareSocketPath(socketPath: string): void {
  ensurePrivateDirSync(dirname(socketPath));
  rmSync(socketPath, { force: true });
}

/** The Workload API socket's directory: searchable by every user (workloads run as any UID), writable by its owner only. */
export const SHARED_SOCKET_DIR_MODE = 0o755;
/** The Workload API socket itself: any local process may connect (connect(2) needs write permission on the socket file). */
export const SHARED_SOCKET_MODE = 0o666;

/**
 * Prepares a socket every local process may connect to. Missing directories are created 0755
 * whatever the umask. The directory must not be writable by group or others (sticky or not):
 * whoever can write it could put their own socket in the broker's place and hand workloads a
 * trust bundle of their choosing. A stale socket left by a previous run is removed.
 */
export function prepareSharedSocketPath(socketPath: string): void {
  const dir = resolve(dirname(socketPath));
  const first = mkdirSync(dir, { recursive: true, mode: SHARED_SOCKET_DIR_MODE });
  if (first !== undefined) {
    let at = first;
    chmodSync(at, SHARED_SOCKET_DIR_MODE);
    for (const part of relative(first, dir).split(sep).filter(Boolean)) chmodSync((at = join(at, part)), SHARED_SOCKET_DIR_MODE);
  }
  const mode = statSync(dir).mode & 0o777;
  if ((mode & 0o022) !== 0) {
    throw new BrokerError('ERR_SOCKET_DIR_UNSAFE', `socket directory ${dir} is writable by group or others (mode ${mode.toString(8)}); make it 0755`, {
      status: 'failed-precondition',
    });
  }
  rmSync(socketPath, { force: true });
}
