/**
 * The repair controller against the devcluster, authenticated as the istio-cni service
 * account with the RBAC rendered from deploy/: broken pods on this node are labelled or
 * deleted as configured, with Events; healthy pods and other nodes' pods are left alone;
 * denied actions are retried a bounded number of times, then given up.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { PatchStrategy, setHeaderOptions, type V1ContainerStatus } from '@kubernetes/client-node';
import { Registry } from 'prom-client';
import { systemClock, type Clock } from '../../../src/core/clock.js';
import type { InformerSettings } from '../../../src/kube/index.js';
import { SkipClock } from '../../support/skip-clock.js';
import { createLogger, type LogFields } from '../../../src/core/log.js';
import { loadRepairConfig, startRepairController, type RepairMode } from '../../../src/cni/repair/index.js';
import { adminClient, createPod, kubeConfigFor, serviceAccountToken, startCluster, type DevCluster } from '../../support/cluster.js';
import { identityObjects } from '../../deploy/manifests.js';
import { waitFor } from '../install/host-tree.js';
import { kubectlMissing } from '../../support/tools.js';

const NODE = 'node-a';
let cluster: DevCluster;
let cniToken: string;
let brokerToken: string;

/** The RBAC comes from `kubectl kustomize deploy/`. */
const skip = kubectlMissing();

before(async () => {
  if (skip) return;
  // Bookmarks every 100 ms: a healthy watch is never idle for the 1 s watchdog of the silent-watch test.
  cluster = await startCluster({ simulateKubelet: false, bookmarkIntervalMs: 100 });
  await cluster.apply(await identityObjects());
  cniToken = await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'istio-cni' });
  brokerToken = await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'ztunnel' });
});
after(() => cluster?.close());

const validation = (exitCode: number): V1ContainerStatus[] => [
  {
    name: 'istio-validation',
    image: 'certbroker',
    imageID: '',
    ready: false,
    restartCount: 1,
    state: exitCode === 0 ? { terminated: { exitCode: 0, reason: 'Completed' } } : { waiting: { reason: 'CrashLoopBackOff' } },
    lastState: exitCode === 0 ? {} : { terminated: { exitCode, reason: 'Error' } },
  },
];

/** Creates a pod and sets its init container status the way a kubelet would. */
async function pod(namespace: string, name: string, o: { node?: string; exitCode?: number } = {}): Promise<void> {
  await createPod(cluster, { namespace, name, nodeName: o.node ?? NODE });
  if (o.exitCode !== undefined) await setValidation(namespace, name, o.exitCode);
}

async function setValidation(namespace: string, name: string, exitCode: number): Promise<void> {
  await adminClient(cluster).core.patchNamespacedPodStatus(
    { namespace, name, body: { status: { phase: 'Pending', initContainerStatuses: validation(exitCode) } } },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

async function labels(namespace: string, name: string): Promise<Record<string, string> | undefined> {
  try {
    return (await adminClient(cluster).core.readNamespacedPod({ namespace, name })).metadata?.labels ?? {};
  } catch {
    return undefined; // gone
  }
}

async function eventsFor(namespace: string, name: string): Promise<Array<{ reason?: string; source?: string; type?: string; message?: string }>> {
  const list = await adminClient(cluster).core.listNamespacedEvent({ namespace });
  return list.items
    .filter((e) => e.involvedObject.name === name)
    .map((e) => ({ reason: e.reason, source: e.source?.component, type: e.type, message: e.message }));
}

function startController(mode: RepairMode, token: string, logs: LogFields[] = [], o: { clock?: Clock; informer?: InformerSettings } = {}) {
  const stop = new AbortController();
  const logger = createLogger({ level: 'debug', sink: (l) => logs.push(JSON.parse(l) as LogFields) });
  const loaded = loadRepairConfig({ NODE_NAME: NODE, REPAIR_MODE: mode, REPAIR_MAX_ATTEMPTS: '3' });
  const config = o.informer ? { ...loaded, informer: o.informer } : loaded;
  const registry = new Registry();
  const handle = startRepairController({
    config,
    kubeConfig: kubeConfigFor(cluster, token),
    logger,
    registry,
    clock: o.clock ?? systemClock,
    signal: stop.signal,
    retryBaseMs: 5,
  });
  return {
    handle,
    registry,
    async stop() {
      stop.abort();
      await (await handle).stopped;
    },
  };
}

test('label mode: the broken pod is labelled through pods/status (a 500 retried) with one Event; others untouched', { skip }, async (t) => {
  const ns = 'label-app';
  await pod(ns, 'broken', { exitCode: 126 });
  await pod(ns, 'healthy', { exitCode: 0 });
  await pod(ns, 'plain');
  await pod(ns, 'other-code', { exitCode: 1 });
  await pod(ns, 'elsewhere', { node: 'node-b', exitCode: 126 });
  // The first label attempt hits a transient API error and must be retried.
  cluster.faults.failWith500(1, { match: { method: 'PATCH', path: '/status' } });
  const logs: LogFields[] = [];
  const c = startController('label', cniToken, logs);
  t.after(() => c.stop());

  const labelEvents = async (name: string) =>
    (await eventsFor(ns, name)).filter((e) => e.reason === 'LabelBrokenPod' && e.type === 'Warning' && e.source === 'cni-repair');
  await waitFor(async () => (await labelEvents('broken')).some((e) => e.message === 'pod detected as broken, labeled'), 'labeled event');
  assert.equal(cluster.faults.injectedFailures, 1);
  assert.ok(logs.some((l) => l.msg === 'labelled broken pod' && l.pod === `${ns}/broken`));
  const messages = (await labelEvents('broken')).map((e) => e.message ?? '');
  assert.equal(messages.filter((m) => m.startsWith('pod detected as broken, but failed to label')).length, 1, 'the failed first attempt is recorded');
  assert.equal(messages.filter((m) => m === 'pod detected as broken, labeled').length, 1);

  // A pod that breaks later is found through the watch, even after the watch connection broke.
  assert.ok(cluster.faults.dropWatches() >= 1);
  await setValidation(ns, 'plain', 126);
  await waitFor(() => logs.some((l) => l.msg === 'labelled broken pod' && l.pod === `${ns}/plain`), 'late-broken pod labelled');

  // pods/status may change metadata (as on a real API server): the label is on the pods.
  await waitFor(async () => (await labels(ns, 'broken'))?.['cni.istio.io/uninitialized'] === 'true', 'label on broken pod');
  await waitFor(async () => (await labels(ns, 'plain'))?.['cni.istio.io/uninitialized'] === 'true', 'label on late-broken pod');
  assert.equal((await c.handle).problem(), undefined, 'synced');
  assert.equal(logs.filter((l) => l.msg === 'labelled broken pod' && l.pod === `${ns}/broken`).length, 1, 'labelled once, no loop');
  assert.notEqual(await labels(ns, 'broken'), undefined, 'label mode never deletes');
  for (const name of ['healthy', 'other-code']) {
    assert.deepStrictEqual(await labels(ns, name), {}, `${name} left alone`);
    assert.deepStrictEqual(await eventsFor(ns, name), []);
  }
  assert.deepStrictEqual(await labels(ns, 'elsewhere'), {}, "another node's pod is not ours to repair");
  assert.deepStrictEqual(await eventsFor(ns, 'elsewhere'), []);
});

test('delete mode: the broken pod is deleted (with preconditions) and an Event recorded; healthy pod stays', { skip }, async (t) => {
  const ns = 'delete-app';
  await pod(ns, 'broken', { exitCode: 126 });
  await pod(ns, 'healthy', { exitCode: 0 });
  const c = startController('delete', cniToken);
  t.after(() => c.stop());

  await waitFor(async () => (await labels(ns, 'broken')) === undefined, 'broken pod deleted');
  await waitFor(
    async () => (await eventsFor(ns, 'broken')).some((e) => e.reason === 'DeleteBrokenPod' && e.message === 'pod detected as broken, deleted'),
    'DeleteBrokenPod event',
  );
  assert.deepStrictEqual(await labels(ns, 'healthy'), {});
});

test('an account without the repair permissions: bounded retries, then it gives up; the pod stays', { skip }, async (t) => {
  const ns = 'denied-app';
  await pod(ns, 'broken', { exitCode: 126 });
  const logs: LogFields[] = [];
  const c = startController('delete', brokerToken, logs);
  t.after(() => c.stop());

  await waitFor(() => logs.some((l) => l.msg === 'giving up on pod until it changes'), 'give-up log');
  const giveUp = logs.find((l) => l.msg === 'giving up on pod until it changes')!;
  assert.equal(giveUp.attempts, 3);
  assert.match(String(giveUp.err), /ERR_REPAIR_ACTION_FAILED/);
  assert.ok(logs.some((l) => l.msg === 'cannot record event'), 'event creation denied too, logged, not fatal');
  assert.deepStrictEqual(await labels(ns, 'broken'), {}, 'still there');
});

test('a pod that breaks while the pod watch is silent (hung API replica) is repaired once the watchdog re-opens the watch', { skip }, async (t) => {
  const ns = 'silent-app';
  await pod(ns, 'early', { exitCode: 126 });
  const logs: LogFields[] = [];
  const clock = new SkipClock();
  const c = startController('label', cniToken, logs, { clock, informer: { idleTimeoutMs: 1000, initialBackoffMs: 50 } });
  t.after(() => {
    cluster.faults.clear();
    return c.stop();
  });
  await waitFor(() => logs.some((l) => l.msg === 'labelled broken pod' && l.pod === `${ns}/early`), 'the pod broken before the start labelled');
  assert.equal((await c.handle).problem(), undefined);

  const watch = { path: '/api/v1/pods', onlyWatch: true, query: { fieldSelector: `spec.nodeName=${NODE}` } };
  // Only this controller watches now (an earlier test's connection must be gone first).
  await waitFor(() => cluster.faults.openWatches === 1, 'one open watch');
  assert.equal(cluster.faults.silenceWatches({ match: watch }), 1);
  await pod(ns, 'late', { exitCode: 126 });
  clock.skip(1000);
  await waitFor(() => logs.some((l) => l.msg === 'labelled broken pod' && l.pod === `${ns}/late`), 'the pod broken while silent labelled');
  assert.ok(logs.some((l) => l.msg === 'watch silent (no event or bookmark), re-watching'));
  await waitFor(async () => (await labels(ns, 'late'))?.['cni.istio.io/uninitialized'] === 'true', 'label on the late pod');
  const ready = async () => /^certbroker_informer_ready\{resource="pods",cluster=""\} (\d)$/m.exec(await c.registry.metrics())?.[1];
  assert.equal(await ready(), '1');

  // Every watch hangs and every list fails: nothing is heard any more. The handle and the
  // metric (install-cni's only signal for repair) say so; then the API server answers again.
  cluster.faults.silenceWatches({ match: { path: '/api/v1/pods', onlyWatch: true }, newWatches: 1_000_000 });
  cluster.faults.failWith500(1_000_000, { match: { path: '/api/v1/pods', exceptWatch: true } });
  const problem = await waitFor(async () => {
    clock.skip(500);
    const p = (await c.handle).problem();
    return p?.includes('watch stale') ? p : undefined;
  }, 'a stale repair watch');
  assert.match(problem, /^pods watch stale: no list, event or bookmark for [\d.]+ s \(watchdog 1 s, \d+ watchdog restarts\)/);
  assert.equal(await ready(), '0', 'the metric shows the stale watch');

  cluster.faults.clear();
  await waitFor(async () => {
    clock.skip(100);
    return (await c.handle).problem() === undefined && (await ready()) === '1';
  }, 'fresh again');
});

test('lifecycle: handle.stop(deadlineMs) stops a controller started without a signal; stopped resolves', { skip }, async () => {
  const loaded = loadRepairConfig({ NODE_NAME: NODE, REPAIR_MODE: 'label', REPAIR_MAX_ATTEMPTS: '3' });
  const handle = await startRepairController({
    config: loaded,
    kubeConfig: kubeConfigFor(cluster, cniToken),
    logger: createLogger({ level: 'error' }),
    registry: new Registry(),
    clock: systemClock,
  });
  await waitFor(() => handle.problem() === undefined, 'the pod watch listed');
  let stopped = false;
  void handle.stopped.then(() => (stopped = true));
  await handle.stop(10_000);
  await new Promise((r) => setImmediate(r));
  assert.equal(stopped, true, 'stop() resolved because the controller stopped, not at its deadline');
});
