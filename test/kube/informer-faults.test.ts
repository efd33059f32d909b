/**
 * The shared informer against the devcluster's fault injection: list pages (`limit`/
 * `continue`) as the devcluster's request log shows them, a 410 on a continue token, a 429 on
 * the watch with Retry-After, a watch that stays open and goes silent (the idle watchdog
 * re-watches, then re-lists, and readiness reports the stale watch), a list that never
 * answers, and the start(signal)/stop lifecycle. Time moves only by FakeClock advances; the
 * requested delays are read off the clock, never measured.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { FakeClock } from '../support/fake-clock.js';
import { createLogger, type LogFields } from '../../src/core/log.js';
import { createPodInformer, InformerMetrics, type PodInformer } from '../../src/kube/index.js';
import { adminClient, createPod, kubeConfigFor, type DevCluster, startCluster } from '../support/cluster.js';
import { until } from '../support/until.js';

let cluster: DevCluster;
before(async () => {
  // Bookmarks off in practice (an hour apart): a watch is silent unless something changes.
  cluster = await startCluster({ simulateKubelet: false, bookmarkIntervalMs: 3_600_000 });
});
after(() => cluster.close());


function capture(): { logs: LogFields[]; logger: ReturnType<typeof createLogger> } {
  const logs: LogFields[] = [];
  return { logs, logger: createLogger({ level: 'debug', sink: (l) => logs.push(JSON.parse(l) as LogFields) }) };
}

async function namespaceWithPods(ns: string, count: number): Promise<void> {
  await adminClient(cluster).core.createNamespace({ body: { metadata: { name: ns } } });
  for (let i = 0; i < count; i++) await createPod(cluster, { namespace: ns, name: `p-${i}`, nodeName: 'node-a' });
}

const podsPath = (ns: string) => `/api/v1/namespaces/${ns}/pods`;

async function withInformer(informer: PodInformer, body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } finally {
    cluster.faults.clear();
    await informer.stop();
  }
}

test('lists in pages with limit/continue, then watches with bookmarks and a randomised timeout', async () => {
  await namespaceWithPods('pg', 7);
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'pg', pageSize: 3 });
  informer.start();
  await withInformer(informer, async () => {
    await informer.waitForSync();
    const lists = cluster.requestLog.entries({ method: 'GET', path: podsPath('pg'), watch: false });
    assert.deepEqual(
      lists.map((e) => [e.query.limit, e.query.continue !== undefined]),
      [
        ['3', false],
        ['3', true],
        ['3', true],
      ],
      'three pages of at most 3, the later ones with the continue token',
    );
    assert.deepEqual(informer.list().map((p) => p.metadata?.name).sort(), ['p-0', 'p-1', 'p-2', 'p-3', 'p-4', 'p-5', 'p-6']);
    assert.equal(informer.stats.pages, 3);
    assert.equal(informer.stats.lists, 1);

    await until(() => cluster.requestLog.entries({ path: podsPath('pg'), watch: true }).length > 0, 'the watch request');
    const w = cluster.requestLog.entries({ path: podsPath('pg'), watch: true })[0]!.query;
    assert.equal(w.allowWatchBookmarks, 'true');
    assert.equal(w.resourceVersion, informer.resourceVersion);
    const timeout = Number(w.timeoutSeconds);
    assert.ok(timeout >= 300 && timeout < 600, `timeoutSeconds ${w.timeoutSeconds} in [300, 600)`);
  });
});

test('a 410 on a continue token starts the list over (logged, counted as a 410 restart)', async () => {
  await namespaceWithPods('gone', 5);
  cluster.faults.expireContinue(1, { match: { path: podsPath('gone') } });
  const { logs, logger } = capture();
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'gone', pageSize: 2, logger });
  informer.start();
  await withInformer(informer, async () => {
    await informer.waitForSync();
    const lists = cluster.requestLog.entries({ method: 'GET', path: podsPath('gone'), watch: false });
    assert.deepEqual(
      lists.map((e) => e.query.continue !== undefined),
      [false, true, false, true, true],
      'first page, expired continue, then a whole new list of three pages',
    );
    assert.equal(informer.list().length, 5);
    assert.equal(informer.stats.restarts['410'], 1);
    assert.ok(logs.some((l) => l.msg === 'list snapshot expired (410 Gone on continue), listing again'));
  });
});

test('a 429 on the watch is retried after its Retry-After (8 s), not after the backoff', async () => {
  const clock = new FakeClock();
  await namespaceWithPods('tw', 1);
  cluster.faults.failWith429(1, { retryAfterSeconds: 8, match: { path: podsPath('tw'), onlyWatch: true } });
  const { logs, logger } = capture();
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'tw', clock, rng: () => 0.5, initialBackoffMs: 100, logger });
  informer.start();
  await withInformer(informer, async () => {
    await informer.waitForSync();
    await until(() => logs.some((l) => /failed, retrying$/.test(String(l.msg))), 'the refused watch');
    await clock.waitForTimers(1);
    assert.equal(clock.pendingTimers, 1, 'only the retry delay is armed');
    assert.equal(clock.nextDue! - clock.now(), 8000, 'the delay the informer asked the clock for');
    const line = logs.find((l) => /failed, retrying$/.test(String(l.msg)))!;
    assert.equal(line.msg, 'watch failed, retrying');
    assert.equal(line.delayMs, 8000);
    assert.equal(line.retryAfterMs, 8000);
    assert.equal(informer.stats.restarts.throttled, 1);

    await clock.advance(7999);
    assert.equal(cluster.requestLog.entries({ path: podsPath('tw'), watch: true }).length, 1, 'no second watch before Retry-After');
    await clock.advance(1);
    await until(() => cluster.requestLog.entries({ path: podsPath('tw'), watch: true }).length === 2, 'the watch after Retry-After');
    await createPod(cluster, { namespace: 'tw', name: 'later', nodeName: 'node-a' });
    await until(() => informer.get('tw', 'later') !== undefined, 'an event on the new watch');
  });
});

test('a watch that goes silent: the watchdog re-watches from the last resourceVersion, then re-lists; readiness reports it stale', async () => {
  const clock = new FakeClock();
  await namespaceWithPods('wd', 1);
  const registry = new Registry();
  const metrics = new InformerMetrics(registry);
  const { logs, logger } = capture();
  const idleTimeoutMs = 30_000;
  const informer = createPodInformer({
    kubeConfig: kubeConfigFor(cluster, cluster.adminToken),
    namespace: 'wd',
    clock,
    rng: () => 0.5,
    idleTimeoutMs,
    initialBackoffMs: 1000,
    logger,
  });
  metrics.track(informer);
  informer.start();
  const match = { path: podsPath('wd') };
  const watches = () => cluster.requestLog.entries({ path: podsPath('wd'), watch: true }).length;
  await withInformer(informer, async () => {
    await informer.waitForSync();
    // The replica behind the open watch hangs: the connection stays open, nothing comes.
    let silenced = 0;
    await until(() => (silenced += cluster.faults.silenceWatches({ match })) > 0, 'the open watch');
    await createPod(cluster, { namespace: 'wd', name: 'while-silent', nodeName: 'node-a' });
    assert.equal(informer.get('wd', 'while-silent'), undefined, 'a silent watch delivers nothing');

    await until(() => clock.pendingTimers > 0, 'the watchdog armed');
    assert.equal(clock.nextDue! - clock.now(), idleTimeoutMs, 'the watchdog is armed for the idle window');
    await clock.advance(idleTimeoutMs);
    await until(() => informer.get('wd', 'while-silent') !== undefined, 'the pod, through the new watch');
    assert.equal(informer.stats.lists, 1, 're-watched from the last resourceVersion, no re-list');
    assert.equal(informer.stats.restarts.watchdog, 1);
    assert.ok(logs.some((l) => l.msg === 'watch silent (no event or bookmark), re-watching' && l.informer === 'pods'));
    assert.equal(informer.problem(), undefined);
    const text = await registry.metrics();
    assert.match(text, /certbroker_informer_restarts_total\{resource="pods",cluster="",reason="watchdog"\} 1/);
    assert.match(text, /certbroker_informer_restarts_total\{resource="pods",cluster="",reason="410"\} 0/);
    assert.match(text, /certbroker_informer_last_event_age_seconds\{resource="pods",cluster=""\} 0/);

    // Now every watch hangs and lists fail: one more silent watch, then a re-list that fails.
    cluster.faults.silenceWatches({ match, newWatches: 1000 });
    cluster.faults.failWith500(1000, { match: { ...match, exceptWatch: true } });
    let seen = watches();
    await clock.advance(idleTimeoutMs);
    await until(() => watches() > seen, 'the second watch');
    seen = watches();
    await clock.waitForTimers(1);
    await clock.advance(idleTimeoutMs);
    await until(() => logs.some((l) => l.msg === 'watch silent again (no event or bookmark), re-listing'), 'the re-list');
    await until(() => logs.some((l) => l.msg === 'list failed, retrying'), 'the failed re-list');
    assert.equal(watches(), seen, 'a second silent watch in a row re-lists instead of watching again');
    // Nothing heard for more than two watchdog windows: not ready, and it says why.
    while (informer.problem() === undefined) {
      await clock.waitForTimers(1);
      await clock.advance(clock.nextDue! - clock.now());
    }
    assert.match(informer.problem()!, /^pods watch stale: no list, event or bookmark for \d+(\.\d)? s \(watchdog 30 s, 3 watchdog restarts\); last error: ERR_KUBE_API_STATUS/);
    const age = /certbroker_informer_last_event_age_seconds\{resource="pods",cluster=""\} (\d+(\.\d+)?)/.exec(await registry.metrics());
    assert.ok(age && Number(age[1]) > 2 * (idleTimeoutMs / 1000), `age gauge ${age?.[1]} above two windows`);

    // The API server answers again: the next retry lists, and the informer is trusted again.
    cluster.faults.clear();
    await clock.waitForTimers(1);
    await clock.advance(clock.nextDue! - clock.now());
    await until(() => informer.problem() === undefined, 'ready again');
    assert.equal(informer.stats.lists, 2);
  });
});

test('onHealthChange: told when the first list is in, exactly when nothing was heard for the stale window, and when heard again', async () => {
  const clock = new FakeClock();
  await namespaceWithPods('hc', 1);
  const idleTimeoutMs = 30_000;
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'hc', clock, rng: () => 0.5, idleTimeoutMs, initialBackoffMs: 1000 });
  const told: Array<string | undefined> = [];
  informer.onHealthChange((problem) => told.push(problem));
  informer.start();
  const match = { path: podsPath('hc') };
  await withInformer(informer, async () => {
    await informer.waitForSync();
    await until(() => told.length === 1, 'told at the first list');
    assert.deepEqual(told, [undefined], 'healthy once listed');
    const heardAt = clock.now();

    // Nothing is heard any more: the open watch hangs, so do new ones, and lists fail.
    await until(() => cluster.faults.silenceWatches({ match }) > 0, 'the open watch');
    cluster.faults.silenceWatches({ match, newWatches: 1000 });
    cluster.faults.failWith500(1000, { match: { ...match, exceptWatch: true } });
    await clock.advance(heardAt + 2 * idleTimeoutMs - clock.now());
    assert.equal(told.length, 1, 'not stale at exactly two windows');
    await clock.advance(1);
    assert.equal(told.length, 2, 'told the moment the window is over, by the clock alone');
    assert.match(told[1] ?? '', /^pods watch stale: no list, event or bookmark for 60 s/);

    // The API server answers again: the next re-list is heard, and the listeners are told.
    cluster.faults.clear();
    for (let i = 0; i < 400 && told.length < 3; i++) {
      if (clock.nextDue !== undefined) await clock.advance(clock.nextDue - clock.now());
      await new Promise((r) => setTimeout(r, 5));
    }
    assert.deepEqual(told.slice(2), [undefined], 'healthy again');
    assert.equal(informer.problem(), undefined);
  });
});

test('a list that never answers times out and is retried', async () => {
  await namespaceWithPods('slow', 1);
  const { logs, logger } = capture();
  cluster.faults.setLatency(15_000);
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'slow', requestTimeoutMs: 200, initialBackoffMs: 10, logger });
  informer.start();
  await withInformer(informer, async () => {
    await until(() => logs.some((l) => l.msg === 'list failed, retrying'), 'the list deadline');
    assert.match(String(logs.find((l) => l.msg === 'list failed, retrying')!.err), /^ERR_KUBE_TIMEOUT/);
    assert.match(informer.problem()!, /^pods not listed yet; last error: ERR_KUBE_TIMEOUT/);
    cluster.faults.setLatency(0);
    await informer.waitForSync();
    assert.equal(informer.problem(), undefined);
  });
});

test('start(signal): aborting the signal stops the informer and closes its watch', async () => {
  await namespaceWithPods('life', 1);
  const stop = new AbortController();
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'life' });
  const openBefore = cluster.faults.openWatches;
  informer.start(stop.signal);
  await informer.waitForSync();
  await until(() => cluster.faults.openWatches > openBefore, 'the watch');
  stop.abort();
  await until(() => cluster.faults.openWatches === openBefore, 'the watch closed');
  await informer.stop(100);
});
