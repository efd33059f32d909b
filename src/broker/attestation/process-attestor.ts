/**
 * Attesting a process by its PID, and re-checking it later: which pod it runs in, from the
 * kernel's word only (`/proc/<pid>/stat`, `/proc/<pid>/cgroup`), never from anything the process
 * says. Pure over a `ProcReader`, so PID reuse and races are tested with a scripted reader.
 *
 * PID reuse. A PID names a process only while that process lives; afterwards the kernel may hand
 * it to another one. So an attestation records the PID *and* its start time, and:
 * - at connection time, a process that started after the connection was accepted is not the one
 *   that connected (its PID was reused between connect and attestation): refused;
 * - the start time is read before and after the cgroup, so the cgroup read belongs to that process;
 * - before every message the caller is re-checked: same PID, same start time, not exited, same pod.
 */
import { podOfCgroupFile, type CgroupAnchors, type PodCgroup } from './cgroup-pod.js';
import { isExited, parseProcStat, parseUptimeTicks } from './proc-stat.js';

/** The `/proc` files attestation reads. Each returns the file's text, or undefined when it is gone. */
export interface ProcReader {
  stat(pid: number): string | undefined;
  cgroup(pid: number): string | undefined;
  uptime(): string;
}

/** A process the kernel placed in a pod's cgroup. */
export interface AttestedProcess {
  readonly pid: number;
  /** `/proc/<pid>/stat` field 22 at attestation. */
  readonly startTime: number;
  readonly pod: PodCgroup;
}

/** Why a process gets no pod. */
export type AttestationFailure =
  /** SO_PEERCRED gave no PID this broker can see (0: the peer is in a PID namespace outside ours; run with hostPID). */
  | 'pid-not-visible'
  /** The process exited (or its /proc entry cannot be read). */
  | 'process-gone'
  /** The PID now names another process than the one attested or the one that connected. */
  | 'pid-reused'
  /** Its cgroups name no pod: a host process, or a container that is not a pod. */
  | 'not-in-pod'
  /** A cgroup is named like a pod's but is not where kubelet puts pods. */
  | 'unanchored-cgroup'
  /** Its cgroups name several pods or containers. */
  | 'conflicting-cgroups'
  /** It moved to another pod's cgroup since it was attested. */
  | 'pod-changed';

export type Attestation =
  | { readonly ok: true; readonly process: AttestedProcess }
  | { readonly ok: false; readonly reason: AttestationFailure; readonly detail: string };

function fail(reason: AttestationFailure, detail: string): Attestation {
  return { ok: false, reason, detail };
}

/**
 * Start times may differ by this many ticks from the uptime read at accept time and still count as
 * "started before": both clocks are the same boot clock truncated to ticks; one tick (10 ms) of slack
 * costs nothing and keeps a rounding difference from refusing a real caller.
 */
const START_SLACK_TICKS = 1;

export class ProcessAttestor {
  readonly #reader: ProcReader;
  readonly #anchors: CgroupAnchors;

  constructor(reader: ProcReader, anchors: CgroupAnchors) {
    this.#reader = reader;
    this.#anchors = anchors;
  }

  /** Now on the clock of `starttime` (clock ticks since boot): read when a connection is accepted. */
  nowTicks(): number {
    const ticks = parseUptimeTicks(this.#reader.uptime());
    if (ticks === undefined) throw new Error('/proc/uptime cannot be read');
    return ticks;
  }

  /** The live start time of `pid`, or why there is none. */
  #startTime(pid: number): number | Attestation {
    const text = this.#reader.stat(pid);
    const stat = text === undefined ? undefined : parseProcStat(text);
    if (!stat) return fail('process-gone', `process ${pid} is gone`);
    if (isExited(stat)) return fail('process-gone', `process ${pid} exited`);
    return stat.startTime;
  }

  /** Attests the process `pid`, which connected no later than `acceptedAtTicks` (`nowTicks()` at accept). */
  attest(pid: number, acceptedAtTicks: number): Attestation {
    if (!Number.isSafeInteger(pid) || pid <= 0) return fail('pid-not-visible', `peer PID ${pid} is not visible from the broker's PID namespace`);
    const before = this.#startTime(pid);
    if (typeof before !== 'number') return before;
    if (before > acceptedAtTicks + START_SLACK_TICKS) {
      return fail('pid-reused', `process ${pid} started (tick ${before}) after the connection was accepted (tick ${acceptedAtTicks})`);
    }
    return this.#podOf(pid, before, 'attested');
  }

  /** The same process, still alive, still in the same pod. */
  recheck(process: AttestedProcess): Attestation {
    const result = this.#podOf(process.pid, process.startTime, 'rechecked');
    if (!result.ok) return result;
    if (result.process.pod.podUid !== process.pod.podUid) {
      return fail('pod-changed', `process ${process.pid} moved from pod ${process.pod.podUid} to pod ${result.process.pod.podUid}`);
    }
    return { ok: true, process };
  }

  /** The cgroup of `pid` read between two checks that it is still the process started at `startTime`. */
  #podOf(pid: number, startTime: number, what: 'attested' | 'rechecked'): Attestation {
    const now = this.#startTime(pid);
    if (typeof now !== 'number') return now;
    if (now !== startTime) return fail('pid-reused', `PID ${pid} now names another process than the one ${what}`);
    const cgroup = this.#reader.cgroup(pid);
    const after = this.#startTime(pid);
    if (cgroup === undefined || typeof after !== 'number') return fail('process-gone', `process ${pid} is gone`);
    if (after !== startTime) return fail('pid-reused', `PID ${pid} was reused while its cgroup was read`);
    const result = podOfCgroupFile(cgroup, this.#anchors);
    switch (result.kind) {
      case 'pod':
        return { ok: true, process: { pid, startTime, pod: result.pod } };
      case 'none':
        return fail('not-in-pod', `process ${pid} is in no pod's cgroup`);
      case 'unanchored':
        return fail('unanchored-cgroup', `process ${pid} is in a cgroup named for pod ${result.podUid} outside the kubepods tree`);
      case 'conflict':
        return fail('conflicting-cgroups', `process ${pid}: ${result.detail}`);
    }
  }
}
