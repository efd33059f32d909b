/**
 * A pod's cgroup for the local stack's Workload API sample client: the broker attests a Workload
 * API caller from the kernel (peer PID -> /proc/<pid>/cgroup -> pod UID), so the sample client
 * must really run inside a cgroup laid out as kubelet's systemd driver and containerd name it
 * (`kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/cri-containerd-<id>.scope`)
 * on the cgroup v2 hierarchy. That needs root and a writable hierarchy; `podCgroupProblem()` says
 * why not, and the view shows that reason instead of a result.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

export interface PodCgroup {
  /** The container cgroup, relative to the hierarchy root (`/kubepods.slice/...scope`). */
  readonly path: string;
  /** Moves process `pid` into it. */
  place(pid: number): void;
  /** Removes the directories it created, deepest first (once its processes have exited). */
  remove(): void;
}

/** Where cgroup v2 is mounted, if anywhere. */
function cgroup2Mount(): string | undefined {
  for (const line of readFileSync('/proc/self/mounts', 'utf8').split('\n')) {
    const [, dir, type] = line.split(' ');
    if (type === 'cgroup2' && dir) return dir;
  }
  return undefined;
}

/** Why a pod cgroup cannot be made here, or undefined. */
export function podCgroupProblem(): string | undefined {
  if (process.getuid?.() !== 0) return 'attestation places the client in a pod cgroup, which needs root (run npm start as root to see it)';
  if (!cgroup2Mount()) return 'no cgroup v2 hierarchy is mounted (attestation places the client in a pod cgroup)';
  return undefined;
}

/** Creates the container cgroup of pod `uid` (throws with the reason when the hierarchy refuses). */
export function createPodCgroup(uid: string): PodCgroup {
  const root = cgroup2Mount();
  if (!root) throw new Error('no cgroup v2 hierarchy');
  const pod = `kubepods-besteffort-pod${uid.replaceAll('-', '_')}.slice`;
  const segments = ['kubepods.slice', 'kubepods-besteffort.slice', pod, `cri-containerd-${randomBytes(32).toString('hex')}.scope`];
  const created: string[] = [];
  let dir = root;
  for (const s of segments) {
    dir = join(dir, s);
    if (existsSync(dir)) continue;
    mkdirSync(dir);
    created.push(dir);
  }
  const leaf = dir;
  return {
    path: `/${segments.join('/')}`,
    place: (pid) => writeFileSync(join(leaf, 'cgroup.procs'), `${pid}\n`),
    remove() {
      for (const d of created.reverse()) {
        try {
          rmdirSync(d);
        } catch {
          // Busy (another user of a shared ancestor, or a process still inside): left as it is.
        }
      }
    },
  };
}
