/**
 * ProcessAttestor over a scripted /proc: PID reuse at connection time and between messages,
 * exits, moves between pods, races between the stat and cgroup reads.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProcessAttestor, type ProcReader } from '../../../src/broker/attestation/index.js';

const POD_A = '11111111-2222-3333-4444-555555555555';
const POD_B = '66666666-7777-8888-9999-000000000000';
const CID = 'c'.repeat(64);

function cgroupOf(uid: string | undefined): string {
  if (uid === undefined) return '0::/system.slice/sshd.service\n';
  return `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${uid.replaceAll('-', '_')}.slice/cri-containerd-${CID}.scope\n`;
}

function stat(pid: number, state: string, start: number): string {
  return `${pid} (app) ${state} 1 ${pid} ${pid} 0 -1 4194560 101 0 0 0 0 0 0 0 20 0 1 0 ${start} 2465792 200 18446744073709551615\n`;
}

interface Proc {
  start: number;
  state?: string;
  pod?: string;
}

/** A /proc whose processes tests change between (and, with `onRead`, during) attestations. */
class ScriptedProc implements ProcReader {
  readonly procs = new Map<number, Proc>();
  uptimeTicks = 100_000;
  reads: string[] = [];
  onRead: ((file: 'stat' | 'cgroup', pid: number) => void) | undefined;

  stat(pid: number): string | undefined {
    this.reads.push(`stat ${pid}`);
    this.onRead?.('stat', pid);
    const p = this.procs.get(pid);
    return p ? stat(pid, p.state ?? 'S', p.start) : undefined;
  }
  cgroup(pid: number): string | undefined {
    this.reads.push(`cgroup ${pid}`);
    this.onRead?.('cgroup', pid);
    const p = this.procs.get(pid);
    return p ? cgroupOf(p.pod) : undefined;
  }
  uptime(): string {
    return `${Math.floor(this.uptimeTicks / 100)}.${String(this.uptimeTicks % 100).padStart(2, '0')} 1.00\n`;
  }
}

function setup() {
  const proc = new ScriptedProc();
  return { proc, attestor: new ProcessAttestor(proc, new Map()) };
}

test('attest: a live process in a pod cgroup, started before the connection', () => {
  const { proc, attestor } = setup();
  proc.procs.set(4242, { start: 99_000, pod: POD_A });
  const accepted = attestor.nowTicks();
  assert.equal(accepted, 100_000);
  const r = attestor.attest(4242, accepted);
  assert.ok(r.ok, JSON.stringify(r));
  assert.deepEqual(r.process, { pid: 4242, startTime: 99_000, pod: { podUid: POD_A, qos: 'besteffort', driver: 'systemd', containerId: CID, runtime: 'containerd' } });
});

test('attest: refusals name their reason', () => {
  const { proc, attestor } = setup();
  proc.procs.set(10, { start: 5, pod: undefined });
  proc.procs.set(11, { start: 5, pod: POD_A, state: 'Z' });
  const reason = (pid: number) => {
    const r = attestor.attest(pid, 100_000);
    return r.ok ? 'ok' : r.reason;
  };
  assert.equal(reason(0), 'pid-not-visible', 'SO_PEERCRED says 0 for a peer outside our PID namespace');
  assert.equal(reason(-1), 'pid-not-visible');
  assert.equal(reason(9), 'process-gone');
  assert.equal(reason(10), 'not-in-pod');
  assert.equal(reason(11), 'process-gone', 'a zombie is gone');
});

test('attest: a PID reused between connect and attestation (the process started after the accept) is refused', () => {
  const { proc, attestor } = setup();
  const accepted = attestor.nowTicks();
  // The connecting process exited; the kernel gave its PID to a new process in another pod.
  proc.procs.set(4242, { start: accepted + 50, pod: POD_B });
  const r = attestor.attest(4242, accepted);
  assert.ok(!r.ok && r.reason === 'pid-reused', JSON.stringify(r));
  // Started within the same tick (or one tick of slack) is still "before".
  proc.procs.set(4243, { start: accepted + 1, pod: POD_A });
  assert.ok(attestor.attest(4243, accepted).ok);
});

test('attest: the cgroup is read between two stat reads; a PID reused in between is caught', () => {
  const { proc, attestor } = setup();
  proc.procs.set(4242, { start: 99_000, pod: POD_A });
  proc.onRead = (file, pid) => {
    // Right after the cgroup read, the process dies and its PID goes to another process.
    if (file === 'cgroup' && pid === 4242) proc.procs.set(4242, { start: 99_500, pod: POD_B });
  };
  const r = attestor.attest(4242, 100_000);
  assert.ok(!r.ok && r.reason === 'pid-reused', JSON.stringify(r));
  assert.deepEqual(proc.reads, ['stat 4242', 'stat 4242', 'cgroup 4242', 'stat 4242']);
});

test('recheck: same process, same pod -> ok; then every way it stops being the caller', () => {
  const { proc, attestor } = setup();
  proc.procs.set(4242, { start: 99_000, pod: POD_A });
  const first = attestor.attest(4242, 100_000);
  assert.ok(first.ok);
  const attested = first.process;
  assert.ok(attestor.recheck(attested).ok);

  proc.procs.set(4242, { start: 99_000, pod: POD_B });
  const moved = attestor.recheck(attested);
  assert.ok(!moved.ok && moved.reason === 'pod-changed', JSON.stringify(moved));

  // The process exited and its PID went to a new process *in the same pod*: still another process.
  proc.procs.set(4242, { start: 120_000, pod: POD_A });
  const reused = attestor.recheck(attested);
  assert.ok(!reused.ok && reused.reason === 'pid-reused', JSON.stringify(reused));

  proc.procs.set(4242, { start: 99_000, pod: POD_A, state: 'Z' });
  const zombie = attestor.recheck(attested);
  assert.ok(!zombie.ok && zombie.reason === 'process-gone');

  proc.procs.delete(4242);
  const gone = attestor.recheck(attested);
  assert.ok(!gone.ok && gone.reason === 'process-gone');

  proc.procs.set(4242, { start: 99_000, pod: undefined });
  const left = attestor.recheck(attested);
  assert.ok(!left.ok && left.reason === 'not-in-pod');
});

test('recheck: a PID reused while its cgroup is read is caught', () => {
  const { proc, attestor } = setup();
  proc.procs.set(7, { start: 10, pod: POD_A });
  const first = attestor.attest(7, 100_000);
  assert.ok(first.ok);
  proc.onRead = (file) => {
    if (file === 'cgroup') proc.procs.set(7, { start: 11, pod: POD_A });
  };
  const r = attestor.recheck(first.process);
  assert.ok(!r.ok && r.reason === 'pid-reused', JSON.stringify(r));
});
