/**
 * The Lease elector against the devcluster (real HTTPS, real Lease objects with its
 * resourceVersion checks), its timers on a FakeClock: acquisition, waiting out another holder's
 * lease on our own clock, takeover after a crash, release on stop, a conflicting writer, the
 * renew deadline, metrics, and one run on the real clock. Waits are for conditions, never timings.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { CoordinationV1Api, type V1Lease } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { LeaderElector, LeaderMetrics, kubeLeaseClient, type LeadershipChange } from '../../src/kube/index.js';
import { FakeClock } from '../support/fake-clock.js';
import { startCluster, createNamespace, kubeConfigFor, type DevCluster } from '../support/cluster.js';
import { eventually } from '../broker/support/eventually.js';

let cluster: DevCluster;
const NS = 'elect';
before(async () => {
  cluster = await startCluster({ bookmarkIntervalMs: 3_600_000 });
  await createNamespace(cluster, NS);
});
after(() => cluster.close());

const leases = () => kubeConfigFor(cluster, cluster.adminToken).makeApiClient(CoordinationV1Api);
const readLease = (name: string): Promise<V1Lease> => leases().readNamespacedLease({ name, namespace: NS });
/** MicroTime as the server stored it (client-node hands the string through). */
const raw = (v: unknown): string => String(v);

interface Candidate {
  readonly elector: LeaderElector;
  readonly changes: LeadershipChange[];
  readonly started: AbortSignal[];
  stopped: number;
}

function candidate(name: string, identity: string, clock: FakeClock | undefined, extra: Partial<ConstructorParameters<typeof LeaderElector>[0]> = {}): Candidate {
  const c: Candidate = {
    changes: [],
    started: [],
    stopped: 0,
    elector: undefined as never,
  };
  const elector = new LeaderElector({
    lease: kubeLeaseClient({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: NS, name }),
    identity,
    rng: () => 0,
    ...(clock ? { clock } : {}),
    onStartedLeading: (signal) => c.started.push(signal),
    onStoppedLeading: () => {
      c.stopped++;
    },
    ...extra,
  });
  elector.onChange((ch) => c.changes.push(ch));
  return Object.assign(c, { elector });
}

/** Lets every armed sleep be armed, then moves the clock. */
async function step(clock: FakeClock, armed: number, ms: number): Promise<void> {
  await clock.waitForTimers(armed);
  await clock.advance(ms);
}

test('a candidate creates the lease and leads; another waits out the holder on its own clock and takes over after a crash', async () => {
  const clock = new FakeClock();
  const a = candidate('crash', 'a', clock, { releaseOnStop: false });
  const b = candidate('crash', 'b', clock);
  await a.elector.start();
  await eventually('a leads', () => a.elector.isLeader);
  let lease = await readLease('crash');
  assert.equal(lease.spec?.holderIdentity, 'a');
  assert.equal(lease.spec?.leaseDurationSeconds, 15);
  assert.equal(lease.spec?.leaseTransitions, 0);
  assert.match(raw(lease.spec?.renewTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  assert.equal(Date.parse(raw(lease.spec?.acquireTime)), clock.now());
  assert.equal(a.started.length, 1);

  await b.elector.start();
  await clock.waitForTimers(2); // a's renewal, b's retry
  assert.equal(b.elector.isLeader, false);
  assert.equal(b.elector.leader, 'a');
  const t0 = clock.now();
  await step(clock, 2, 2000); // a renews at t0+2s
  await clock.waitForTimers(2);
  lease = await readLease('crash');
  assert.equal(Date.parse(raw(lease.spec?.renewTime)), t0 + 2000, 'the leader renewed');
  assert.equal(Date.parse(raw(lease.spec?.acquireTime)), t0, 'acquireTime stays');

  await a.elector.stop(); // a crash: no release
  assert.equal((await readLease('crash')).spec?.holderIdentity, 'a');
  // b first saw the renewed record at t0+2s or later: until t0+17s it is not expired for b.
  while (clock.now() < t0 + 16_000) {
    await step(clock, 1, 2000);
    await clock.waitForTimers(1);
    assert.equal(b.elector.isLeader, false, `b must not take over at +${clock.now() - t0} ms`);
  }
  assert.equal((await readLease('crash')).spec?.holderIdentity, 'a');
  for (let i = 0; i < 3 && !b.elector.isLeader; i++) {
    await step(clock, 1, 2000);
    await clock.waitForTimers(1);
  }
  assert.equal(b.elector.isLeader, true, 'b took over once the lease expired');
  lease = await readLease('crash');
  assert.equal(lease.spec?.holderIdentity, 'b');
  assert.equal(lease.spec?.leaseTransitions, 1);
  assert.equal(Date.parse(raw(lease.spec?.acquireTime)), clock.now());
  assert.deepEqual(b.changes.filter((c) => c.type !== 'failure').map((c) => c.type), ['leader', 'leader', 'gained']);
  await b.elector.stop();
});

test('release on stop: the successor takes over at its next try, without waiting out the lease', async () => {
  const clock = new FakeClock();
  const a = candidate('handover', 'a', clock);
  const b = candidate('handover', 'b', clock);
  await a.elector.start();
  await eventually('a leads', () => a.elector.isLeader);
  await b.elector.start();
  await clock.waitForTimers(2);
  await a.elector.stop();
  assert.equal(a.started[0]?.aborted, true, 'the leader signal aborted');
  assert.equal(a.stopped, 1);
  assert.equal(a.elector.isLeader, false);
  const released = await readLease('handover');
  assert.equal(released.spec?.holderIdentity, '');
  assert.equal(released.spec?.leaseDurationSeconds, 1);
  await step(clock, 1, 2000);
  await eventually('b leads', () => b.elector.isLeader);
  const lease = await readLease('handover');
  assert.equal(lease.spec?.holderIdentity, 'b');
  assert.equal(lease.spec?.leaseTransitions, 1);
  await b.elector.stop();
  assert.equal((await readLease('handover')).spec?.holderIdentity, '');
});

test('another writer takes the lease behind the leader: its write conflicts (409), it reads, sees the new holder and stops leading', async () => {
  const clock = new FakeClock();
  const registry = new Registry();
  const metrics = new LeaderMetrics(registry);
  const a = candidate('intruded', 'a', clock);
  metrics.track(a.elector);
  await a.elector.start();
  await eventually('a leads', () => a.elector.isLeader);
  assert.match(await registry.metrics(), /certbroker_leader\{lease="elect\/intruded"\} 1/);
  const current = await readLease('intruded');
  await leases().replaceNamespacedLease({
    name: 'intruded',
    namespace: NS,
    body: { ...current, spec: { ...current.spec, holderIdentity: 'intruder' } },
  });
  await step(clock, 1, 2000);
  await eventually('a lost the lease', () => !a.elector.isLeader);
  assert.deepEqual(a.changes.find((c) => c.type === 'lost'), { type: 'lost', reason: 'taken' });
  assert.equal(a.started[0]?.aborted, true);
  assert.equal(a.stopped, 1);
  assert.equal(a.elector.leader, 'intruder');
  assert.equal((await readLease('intruded')).spec?.holderIdentity, 'intruder', 'the loser wrote nothing over the winner');
  const text = await registry.metrics();
  assert.match(text, /certbroker_leader\{lease="elect\/intruded"\} 0/);
  assert.match(text, /certbroker_leader_changes_total\{lease="elect\/intruded",change="lost"\} 1/);
  await a.elector.stop();
  assert.equal((await readLease('intruded')).spec?.holderIdentity, 'intruder', 'stop releases only its own lease');
});

test('a leader that cannot renew within the renew deadline stops leading; it leads again once the API answers', async () => {
  const clock = new FakeClock();
  const a = candidate('deadline', 'a', clock);
  await a.elector.start();
  await eventually('a leads', () => a.elector.isLeader);
  cluster.faults.failWith500(1000, { match: { path: '/leases/deadline' } });
  try {
    for (let i = 0; i < 4; i++) {
      await step(clock, 1, 2000);
      await clock.waitForTimers(1);
      assert.equal(a.elector.isLeader, true, `still leading ${(i + 1) * 2} s after the last renewal`);
    }
    await step(clock, 1, 2000);
    await eventually('a gave up', () => !a.elector.isLeader);
    assert.deepEqual(a.changes.find((c) => c.type === 'lost'), { type: 'lost', reason: 'renew-deadline' });
    assert.ok(a.changes.some((c) => c.type === 'failure'));
  } finally {
    cluster.faults.clear();
  }
  // Its own record: nobody else saw it change, and it is ours, so it is taken again at once.
  for (let i = 0; i < 3 && !a.elector.isLeader; i++) await step(clock, 1, 5000);
  await eventually('a leads again', () => a.elector.isLeader);
  assert.equal(a.started.length, 2);
  await a.elector.stop();
});

test('two candidates on the real clock: kill the leader, the other takes over after the lease expires', async () => {
  const timing = { leaseDurationMs: 1000, renewDeadlineMs: 600, retryPeriodMs: 100 };
  const a = candidate('real', 'a', undefined, { ...timing, releaseOnStop: false, rng: Math.random });
  const b = candidate('real', 'b', undefined, { ...timing, rng: Math.random });
  await Promise.all([a.elector.start(), b.elector.start()]);
  const first = await eventually('someone leads', () => (a.elector.isLeader ? a : b.elector.isLeader ? b : undefined));
  const other = first === a ? b : a;
  assert.equal(other.elector.isLeader, false);
  await first.elector.stop(); // no release (a's setting) or released (b's): either way the other leads
  await eventually('the other leads', () => other.elector.isLeader);
  assert.equal((await readLease('real')).spec?.holderIdentity, other.elector.identity);
  await other.elector.stop();
});

test('timings that break client-go\'s rules are refused, all problems at once', () => {
  const lease = kubeLeaseClient({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: NS, name: 'x' });
  assert.throws(
    () => new LeaderElector({ lease, identity: '', leaseDurationMs: 5500, renewDeadlineMs: 6000, retryPeriodMs: 5000 }),
    (err: { code?: string; problems?: string[] }) => err.code === 'ERR_CONFIG_INVALID' && err.problems?.length === 4,
  );
});
