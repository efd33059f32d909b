/**
 * A paged list one page ahead (src/kube/list-page.ts), against the devcluster: the next page is
 * asked for as soon as the current page's continue token is read (its `metadata` comes before
 * its items), never more than one page ahead; the list's resourceVersion is its first page's,
 * so a watch after it replays what changed while the later pages were read. The page reader is
 * the CA's streaming one, wrapped to hold a page open while the test looks.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import type { V1Pod } from '@kubernetes/client-node';
import { createPodInformer } from '../../src/kube/index.js';
import type { PageReader } from '../../src/kube/list-page.js';
import { readSlimPodPage } from '../../src/kube/slim-pod-page.js';
import { adminClient, createPod, deletePod, kubeConfigFor, type DevCluster, startCluster } from '../support/cluster.js';
import { until } from '../support/until.js';

let cluster: DevCluster;
before(async () => {
  cluster = await startCluster({ simulateKubelet: false });
});
after(() => cluster.close());

async function namespaceWithPods(ns: string, count: number): Promise<void> {
  await adminClient(cluster).core.createNamespace({ body: { metadata: { name: ns } } });
  for (let i = 0; i < count; i++) await createPod(cluster, { namespace: ns, name: `p-${i}`, nodeName: 'node-a' });
}

const listRequests = (ns: string) => cluster.requestLog.entries({ method: 'GET', path: `/api/v1/namespaces/${ns}/pods`, watch: false });

/** readSlimPodPage, and `hold(page number, page)` awaited before the page is handed over. */
function holding(hold: (n: number, continueToken: string | undefined) => Promise<void>): { reader: PageReader<V1Pod>; read: () => number } {
  let started = 0;
  let read = 0;
  const reader: PageReader<V1Pod> = async (res: IncomingMessage, what, signal, onContinue) => {
    const n = ++started;
    const page = await readSlimPodPage(res, what, signal, onContinue);
    read++;
    await hold(n, page.continueToken);
    return page;
  };
  return { reader, read: () => read };
}

test('the next page is requested while the current one is still being read, and only one page ahead', async () => {
  await namespaceWithPods('ahead', 7);
  let seenWhileHeld: number | undefined;
  const h = holding(async (n) => {
    if (n !== 1) return;
    // Page 1 is read but not handed over: page 2 must already be asked for, page 3 not.
    await until(() => listRequests('ahead').length >= 2, 'the request for page 2 while page 1 is held');
    await until(() => h.read() >= 2, 'page 2 read');
    await new Promise((r) => setTimeout(r, 50));
    seenWhileHeld = listRequests('ahead').length;
  });
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'ahead', pageSize: 3, readPage: h.reader });
  informer.start();
  try {
    await informer.waitForSync();
    assert.equal(seenWhileHeld, 2, 'page 1 and the page ahead, no more');
    assert.deepEqual(listRequests('ahead').map((e) => e.query.continue !== undefined), [false, true, true]);
    assert.deepEqual(informer.list().map((p) => p.metadata?.name).sort(), ['p-0', 'p-1', 'p-2', 'p-3', 'p-4', 'p-5', 'p-6']);
    assert.equal(informer.stats.pages, 3);
  } finally {
    await informer.stop();
  }
});

test("the list's resourceVersion is its first page's: a pod deleted after page 1 was served is gone once the watch catches up", async () => {
  await namespaceWithPods('snap', 5);
  const h = holding(async (n) => {
    // p-0 is on page 1 (keys in order); it goes while the later pages are still to come.
    if (n === 1) await deletePod(cluster, { namespace: 'snap', name: 'p-0', gracePeriodSeconds: 0 });
  });
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'snap', pageSize: 2, readPage: h.reader });
  informer.start();
  try {
    await informer.waitForSync();
    const lists = listRequests('snap');
    assert.equal(lists.length, 3);
    await until(() => cluster.requestLog.entries({ path: '/api/v1/namespaces/snap/pods', watch: true }).length > 0, 'the watch');
    await until(() => informer.get('snap', 'p-0') === undefined, 'the deletion replayed by the watch from the first page');
    assert.deepEqual(informer.list().map((p) => p.metadata?.name).sort(), ['p-1', 'p-2', 'p-3', 'p-4']);
  } finally {
    await informer.stop();
  }
});

test('a failing page ahead fails the list: it starts over and ends complete', async () => {
  await namespaceWithPods('retry', 6);
  cluster.faults.expireContinue(1, { match: { path: '/api/v1/namespaces/retry/pods' } });
  const informer = createPodInformer({ kubeConfig: kubeConfigFor(cluster, cluster.adminToken), namespace: 'retry', pageSize: 2, readPage: readSlimPodPage });
  informer.start();
  try {
    await informer.waitForSync();
    assert.deepEqual(listRequests('retry').map((e) => e.query.continue !== undefined), [false, true, false, true, true]);
    assert.equal(informer.stats.restarts['410'], 1);
    assert.deepEqual(informer.list().map((p) => p.metadata?.name).sort(), ['p-0', 'p-1', 'p-2', 'p-3', 'p-4', 'p-5']);
  } finally {
    cluster.faults.clear();
    await informer.stop();
  }
});
