import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { makeInformer, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { createPodInformer } from '../../src/kube/index.js';
import type { LongLived } from '../../src/core/long-lived.js';
import { FakeClock } from '../support/fake-clock.js';
import { until } from '../support/until.js';
import { startCluster, adminClient, createPod, deletePod, kubeConfigFor, type DevCluster } from '../support/cluster.js';

let cluster: DevCluster;
before(async () => {
  // Bookmarks off in practice (an hour apart), so resourceVersions move only with real events.
  cluster = await startCluster({ bookmarkIntervalMs: 3_600_000 });
});
after(() => cluster.close());

/** Collects informer callbacks. */
class Recorder {
  readonly events: string[] = [];
  readonly errors: unknown[] = [];

  push(e: string): void {
    this.events.push(e);
  }

  error(err: unknown): void {
    this.errors.push(err);
  }

  until(pred: () => boolean): Promise<void> {
    return until(pred, 'a recorded informer event');
  }
}

const name = (p: V1Pod) => `${p.metadata?.namespace}/${p.metadata?.name}`;

test('pod informer with a node field selector survives a dropped watch and a 410 Gone', async () => {
  await createPod(cluster, { namespace: 'inf', name: 'a-1', nodeName: 'node-a' });
  await createPod(cluster, { namespace: 'inf', name: 'b-1', nodeName: 'node-b' });
  const rec = new Recorder();
  const informer = createPodInformer({
    kubeConfig: kubeConfigFor(cluster, cluster.adminToken),
    fieldSelector: 'spec.nodeName=node-a',
    initialBackoffMs: 20,
    maxBackoffMs: 100,
    onAdd: (p) => rec.push(`add ${name(p)}`),
    onUpdate: (p) => rec.push(`update ${name(p)} ${p.status?.phase}`),
    onDelete: (p) => rec.push(`delete ${name(p)}`),
    onError: (err) => rec.error(err),
  });
  informer.start();
  try {
    await informer.waitForSync();
    assert.equal(informer.synced, true);
    await rec.until(() => rec.events.includes('add inf/a-1'));
    assert.ok(!rec.events.some((e) => e.includes('b-1')), 'node-b pods are filtered out');

    // 1. The server drops every watch: the informer re-watches from its resourceVersion.
    const listsBefore = informer.stats.lists;
    await rec.until(() => cluster.faults.openWatches > 0);
    assert.ok(cluster.faults.dropWatches() >= 1);
    await createPod(cluster, { namespace: 'inf', name: 'a-2', nodeName: 'node-a' });
    await rec.until(() => rec.events.includes('add inf/a-2'));
    assert.equal(informer.stats.lists, listsBefore, 'a dropped watch resumes without a re-list');

    // 2. Watches fail (500) while the world changes and history is compacted: the resumed watch
    //    gets 410 Gone, the informer re-lists and reports exactly what it missed.
    await rec.until(() => rec.events.includes('update inf/a-2 Running'));
    cluster.faults.failWith500(1_000_000, { match: { path: '/api/v1/pods' } });
    cluster.faults.dropWatches();
    const errorsBefore = rec.errors.length;
    await rec.until(() => rec.errors.length > errorsBefore);
    await deletePod(cluster, { namespace: 'inf', name: 'a-1', gracePeriodSeconds: 0 });
    await createPod(cluster, { namespace: 'inf', name: 'a-3', nodeName: 'node-a' });
    await createPod(cluster, { namespace: 'inf', name: 'b-2', nodeName: 'node-b' });
    cluster.faults.compact();
    cluster.faults.clear();
    await rec.until(() => rec.events.includes('delete inf/a-1') && rec.events.includes('add inf/a-3'));
    assert.ok(informer.stats.lists > listsBefore, 'the 410 forced a re-list');
    await rec.until(() => informer.list().length === 2);
    assert.deepEqual(informer.list().map(name).sort(), ['inf/a-2', 'inf/a-3']);
    assert.ok(!rec.events.some((e) => e.includes('b-2')));
  } finally {
    cluster.faults.clear();
    await informer.stop();
  }
});

test('client-node makeInformer reports a dropped watch as an error (why src/kube has its own loop)', async () => {
  const kc = kubeConfigFor(cluster, cluster.adminToken);
  const api = kc.makeApiClient(CoreV1Api);
  const informer = makeInformer<V1Pod>(kc, '/api/v1/namespaces/mk/pods', () => api.listNamespacedPod({ namespace: 'mk' }));
  const rec = new Recorder();
  informer.on('add', (p) => rec.push(`add ${name(p)}`));
  informer.on('error', (err) => rec.error(err));
  await adminClient(cluster).core.createNamespace({ body: { metadata: { name: 'mk' } } });
  await informer.start();
  try {
    await createPod(cluster, { namespace: 'mk', name: 'p1' });
    await rec.until(() => rec.events.includes('add mk/p1'));
    cluster.faults.dropWatches();
    await rec.until(() => rec.errors.length > 0 || rec.events.length > 1);
    assert.ok(rec.errors.length > 0, 'makeInformer surfaces the drop through its error callback and does not restart itself');
  } finally {
    await informer.stop();
  }
});

test('informer retries a failing list with exponential backoff on the injected clock (no real waiting)', async () => {
  const clock = new FakeClock();
  await adminClient(cluster).core.createNamespace({ body: { metadata: { name: 'bo' } } });
  cluster.faults.failWith500(4, { match: { path: '/api/v1/namespaces/bo/pods' } });
  const errors: unknown[] = [];
  const informer = createPodInformer({
    kubeConfig: kubeConfigFor(cluster, cluster.adminToken),
    namespace: 'bo',
    clock,
    rng: () => 0.5, // jitter midpoint: the base delay exactly
    initialBackoffMs: 100,
    maxBackoffMs: 400,
    onError: (err) => errors.push(err),
  });
  informer.start();
  try {
    for (const expected of [100, 200, 400, 400]) {
      await clock.waitForTimers(1);
      assert.equal(clock.nextDue! - clock.now(), expected);
      assert.equal(informer.synced, false);
      await clock.advance(expected);
    }
    await informer.waitForSync();
    assert.equal(errors.length, 4);
    assert.equal((errors[0] as { code?: string }).code, 'ERR_KUBE_API_STATUS');
    assert.equal((errors[0] as { httpStatus?: number }).httpStatus, 500);
    assert.equal(informer.stats.consecutiveFailures, 0);
  } finally {
    cluster.faults.clear();
    await informer.stop();
  }
});

test('informer honours Retry-After from a 429 on the list', async () => {
  const clock = new FakeClock();
  await adminClient(cluster).core.createNamespace({ body: { metadata: { name: 'ra' } } });
  cluster.faults.failWith429(1, { retryAfterSeconds: 3, match: { path: '/api/v1/namespaces/ra/pods' } });
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'ra', clock, rng: () => 0.5, initialBackoffMs: 100 });
  informer.start();
  try {
    await clock.waitForTimers(1);
    assert.equal(clock.nextDue! - clock.now(), 3000);
    await clock.advance(3000);
    await informer.waitForSync();
  } finally {
    cluster.faults.clear();
    await informer.stop();
  }
});

test('waitForSync leaves nothing behind: many waiters before the first list, then stop() rejects the pending ones', async () => {
  // One abort listener per pending call (the old way) trips Node's leak warning past 10.
  const leakWarnings: string[] = [];
  const onWarning = (w: Error) => {
    if (w.name === 'MaxListenersExceededWarning' && w.message.includes('abort listeners')) leakWarnings.push(w.message);
  };
  process.on('warning', onWarning);
  const WAITERS = 25;
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'ws' });
  const stopped = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'ws' });
  try {
    informer.start();
    // All before the first list can have answered: every one of them waits.
    const waits = Array.from({ length: WAITERS }, () => informer.waitForSync());
    await Promise.all(waits);
    assert.equal(informer.synced, true);
    await informer.waitForSync(); // after sync: resolves at once

    stopped.start();
    const settled = Promise.allSettled(Array.from({ length: WAITERS }, () => stopped.waitForSync()));
    await stopped.stop();
    const outcomes = await settled;
    assert.deepEqual(
      outcomes.map((o) => (o.status === 'rejected' ? (o.reason as { code?: string }).code : o.status)),
      Array.from({ length: WAITERS }, () => 'ERR_KUBE_INFORMER_STOPPED'),
    );
    await assert.rejects(stopped.waitForSync(), (e: unknown) => (e as { code?: string }).code === 'ERR_KUBE_INFORMER_STOPPED');

    // process.emitWarning delivers on a later tick.
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(leakWarnings, []);
  } finally {
    process.off('warning', onWarning);
    await informer.stop();
    await stopped.stop();
  }
});

test('lifecycle (src/core/long-lived.ts): start(signal) resolves while the loop runs; aborting the signal stops it; start after stop does nothing', async () => {
  const informer: LongLived & ReturnType<typeof createPodInformer> = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'lifecycle' });
  const ac = new AbortController();
  await informer.start(ac.signal);
  await informer.waitForSync();
  await until(() => informer.stats.watches === 1, 'one open watch');
  ac.abort();
  await informer.stop(); // resolves once the loop ended (the abort began the stop)
  await informer.start();
  await createPod(cluster, { namespace: 'lifecycle', name: 'after-stop' });
  await new Promise((r) => setImmediate(r));
  assert.equal(informer.list().length, 0, 'a stopped informer hears nothing');
  assert.equal(informer.stats.watches, 1, 'no watch after the stop');
  // A stop before any start resolves at once.
  await createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken) }).stop();
});
