/**
 * The `ProcReader` over the real `/proc` (adapter). Reads are synchronous: procfs files are
 * generated in memory by the kernel on read and never wait on a disk, and a few small reads
 * (~10 µs each) cost less than a trip through libuv's thread pool.
 *
 * The broker must see the workloads' PIDs in this /proc: in Kubernetes, run it with
 * `hostPID: true` (deploy/node-broker.yaml) so its PID namespace and /proc are the node's.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cgroupAnchors } from './cgroup-pod.js';
import { ProcessAttestor, type ProcReader } from './process-attestor.js';

function readOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = err instanceof Error && 'code' in err ? err.code : undefined;
    // ENOENT: no such PID; ESRCH: the process died while the file was open.
    if (code === 'ENOENT' || code === 'ESRCH') return undefined;
    throw err;
  }
}

/** `/proc` (or another procfs mount, e.g. the host's mounted at /host/proc). */
export function procfsReader(procRoot = '/proc'): ProcReader {
  return {
    stat: (pid) => readOrUndefined(join(procRoot, String(pid), 'stat')),
    cgroup: (pid) => readOrUndefined(join(procRoot, String(pid), 'cgroup')),
    uptime: () => readFileSync(join(procRoot, 'uptime'), 'utf8'),
  };
}

/** The broker's own `/proc/self/cgroup`, from which `cgroupAnchors` learns the node's cgroup root. */
export function ownCgroup(procRoot = '/proc'): string {
  return readFileSync(join(procRoot, 'self', 'cgroup'), 'utf8');
}

/** The attestor of this node's processes: the real `/proc`, anchored at the cgroup root learned from the broker's own cgroup. */
export function nodeProcessAttestor(procRoot = '/proc'): ProcessAttestor {
  return new ProcessAttestor(procfsReader(procRoot), cgroupAnchors(ownCgroup(procRoot)));
}
