/**
 * Real cgroups laid out as kubelet lays them out, for processes the broker must attest from the
 * kernel (peer PID -> /proc/<pid>/cgroup -> pod UID): the local stack's Workload API sample client
 * (`npm start`, stack-clients.ts) and the attestation tests with real processes. Needs root.
 *
 * `KubeletCgroups.v2()` works on the cgroup v2 hierarchy (`/sys/fs/cgroup` on a pure v2 host,
 * `/sys/fs/cgroup/unified` on a hybrid one), `KubeletCgroups.v1('pids')` on a v1 controller
 * hierarchy. `podPath` spells a pod's (and container's) cgroup the way kubelet's systemd or
 * cgroupfs driver and the runtimes name them; `place(pid, path)` creates it and moves the process
 * in by writing its PID to `cgroup.procs`. `cleanup()` moves every process still inside back to
 * the hierarchy's root and removes the directories this fixture created, deepest first; it runs
 * at process exit too, so a failing test leaves nothing behind. Ancestors (`kubepods.slice`, …)
 * are shared by the test processes running at once: each fixture lists what it created in a
 * registry file under the temp directory, and every cleanup also removes whatever listed
 * directory has become empty, so the last test out removes the ancestors another one made.
 *
 * `kubeCgroupsProblem()` says why a test must skip (not root, no such hierarchy, cgroups cannot be
 * created here), or undefined.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describeError, errCode } from '../core/errors.js';

export type Qos = 'guaranteed' | 'burstable' | 'besteffort';
export type Runtime = 'containerd' | 'cri-o' | 'docker';

export interface PodLayout {
  readonly driver: 'systemd' | 'cgroupfs';
  readonly qos: Qos;
  readonly uid: string;
  /** Omitted: the pod's own cgroup. */
  readonly container?: { readonly runtime: Runtime; readonly id: string };
}

/** The cgroup path (relative to the hierarchy root) kubelet and the runtime give a pod or container. */
export function podPath(layout: PodLayout): string {
  const { qos, uid, container } = layout;
  if (layout.driver === 'systemd') {
    const slice = `pod${uid.replaceAll('-', '_')}.slice`;
    const pod = qos === 'guaranteed' ? `kubepods.slice/kubepods-${slice}` : `kubepods.slice/kubepods-${qos}.slice/kubepods-${qos}-${slice}`;
    if (!container) return pod;
    const prefix = { containerd: 'cri-containerd', 'cri-o': 'crio', docker: 'docker' }[container.runtime];
    return `${pod}/${prefix}-${container.id}.scope`;
  }
  const pod = qos === 'guaranteed' ? `kubepods/pod${uid}` : `kubepods/${qos}/pod${uid}`;
  if (!container) return pod;
  return `${pod}/${container.runtime === 'cri-o' ? 'crio-' : ''}${container.id}`;
}

function mountOf(type: 'cgroup2' | 'cgroup', option?: string): string | undefined {
  const mounts = readFileSync('/proc/self/mounts', 'utf8').split('\n');
  for (const line of mounts) {
    const [, dir, fsType, opts] = line.split(' ');
    if (fsType !== type || dir === undefined) continue;
    if (option === undefined || (opts ?? '').split(',').includes(option)) return dir;
  }
  return undefined;
}

/** rmdir, retried for a moment while the kernel finishes moving out or reaping the last processes (EBUSY). */
function rmdirWhenEmptied(dir: string): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let attempt = 0; ; attempt++) {
    try {
      rmdirSync(dir);
      return;
    } catch (err) {
      if (errCode(err) !== 'EBUSY' || attempt >= 100) throw err;
      Atomics.wait(pause, 0, 0, 10);
    }
  }
}

/** Where fixtures (of any test process) list the cgroups they created. */
const REGISTRY = join(tmpdir(), 'certbroker-kube-cgroups');

/** Removes every registered directory that is empty now, deepest first; forgets the ones that are gone. */
function sweepRegistered(): void {
  let files: string[];
  try {
    files = readdirSync(REGISTRY).filter((f) => f.endsWith('.json'));
  } catch {
    return;
  }
  for (const f of files) {
    const file = join(REGISTRY, f);
    let dirs: string[];
    try {
      dirs = JSON.parse(readFileSync(file, 'utf8')) as string[];
    } catch {
      continue;
    }
    const left = [...dirs].sort((a, b) => b.length - a.length).filter((d) => {
      try {
        rmdirSync(d);
        return false;
      } catch (err) {
        return errCode(err) !== 'ENOENT';
      }
    });
    if (left.length === 0) rmSync(file, { force: true });
  }
  // The registry itself goes once empty (npm start runs this too: it leaves nothing in TMPDIR).
  try {
    rmdirSync(REGISTRY);
  } catch {
    // another fixture's list is still there, or it is gone already
  }
}

/** Writes a fixture's list; the registry may have been removed by another process's sweep meanwhile. */
function writeRegistered(file: string, dirs: readonly string[]): void {
  for (let attempt = 0; ; attempt++) {
    mkdirSync(REGISTRY, { recursive: true });
    try {
      writeFileSync(file, JSON.stringify(dirs));
      return;
    } catch (err) {
      if (errCode(err) !== 'ENOENT' || attempt >= 5) throw err;
    }
  }
}

/** Fixtures that created something; cleaned up at process exit (the handler is installed once, on first use). */
const live = new Set<KubeletCgroups>();
let exitHook = false;

function cleanUpAtExit(c: KubeletCgroups): void {
  live.add(c);
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const l of live) l.cleanup();
  });
}

export class KubeletCgroups {
  readonly root: string;
  /** Directories this fixture created, in creation order. */
  readonly #created: string[] = [];
  readonly #registry = join(REGISTRY, `${process.pid}-${randomBytes(4).toString('hex')}.json`);

  private constructor(root: string) {
    this.root = root;
  }

  /** The cgroup v2 hierarchy, or undefined when there is none. */
  static v2(): KubeletCgroups | undefined {
    const dir = mountOf('cgroup2');
    return dir ? new KubeletCgroups(dir) : undefined;
  }

  /** A cgroup v1 controller hierarchy (e.g. `pids`), or undefined when there is none. */
  static v1(controller: string): KubeletCgroups | undefined {
    const dir = mountOf('cgroup', controller);
    return dir ? new KubeletCgroups(dir) : undefined;
  }

  /** Creates `relPath` (and missing parents) and moves `pid` into it. */
  place(pid: number, relPath: string): void {
    for (let attempt = 0; ; attempt++) {
      try {
        this.#mkdir(join(this.root, relPath));
        writeFileSync(join(this.root, relPath, 'cgroup.procs'), `${pid}\n`);
        return;
      } catch (err) {
        // Another test's sweep removed an empty ancestor between our mkdir and our write: again.
        if (errCode(err) !== 'ENOENT' || attempt >= 5) throw err;
      }
    }
  }

  #mkdir(dir: string): void {
    if (existsSync(dir)) return;
    this.#mkdir(dirname(dir));
    try {
      mkdirSync(dir);
      this.#created.push(dir);
      cleanUpAtExit(this);
      writeRegistered(this.#registry, this.#created);
    } catch (err) {
      if (errCode(err) !== 'EEXIST') throw err;
    }
  }

  /** Moves every process out of what this fixture created and removes it (shared ancestors still in use stay). */
  cleanup(): void {
    const left: string[] = [];
    for (const dir of [...this.#created].reverse()) {
      if (!existsSync(dir)) continue;
      try {
        for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
          try {
            writeFileSync(join(this.root, 'cgroup.procs'), `${pid}\n`);
          } catch {
            // exited meanwhile
          }
        }
        rmdirWhenEmptied(dir);
      } catch (err) {
        // Another test's cgroup still inside a shared ancestor: it stays registered for the last sweep.
        if (!['ENOENT', 'ENOTEMPTY', 'EBUSY'].includes(errCode(err) ?? '')) throw err;
        if (errCode(err) !== 'ENOENT') left.push(dir);
      }
    }
    this.#created.length = 0;
    if (left.length > 0) writeRegistered(this.#registry, left);
    else rmSync(this.#registry, { force: true });
    sweepRegistered();
  }
}

/** Why real kubelet-style cgroups cannot be made here, or undefined. */
export function kubeCgroupsProblem(hierarchy: KubeletCgroups | undefined, what: string): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root to create cgroups';
  if (!hierarchy) return `no ${what} hierarchy is mounted on this machine`;
  const probe = join(hierarchy.root, `certbroker-probe-${process.pid}`);
  try {
    mkdirSync(probe);
    rmdirSync(probe);
    return undefined;
  } catch (err) {
    return `cannot create cgroups under ${hierarchy.root}: ${describeError(err)}`;
  }
}
