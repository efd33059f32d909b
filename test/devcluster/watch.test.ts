/**
 * Watch semantics over raw HTTPS: resourceVersion replay, the initial state when no RV is
 * given, selectors applied to old and new state, BOOKMARKs, 410 after compaction, and faults
 * (dropped and silenced watches, 429 with Retry-After, 500, expired continue tokens, latency)
 * through the TS handle and the admin endpoint; the request log.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { ClientRequest } from 'node:http';
import { request } from 'node:https';
import { startCluster, adminClient, createPod, rawRequest, serviceAccountToken, type DevCluster } from '../support/cluster.js';

let cluster: DevCluster;
before(async () => {
  cluster = await startCluster({ simulateKubelet: false, bookmarkIntervalMs: 20 });
});
after(() => cluster.close());

interface WatchEvent {
  readonly type: string;
  readonly object: { kind?: string; code?: number; reason?: string; message?: string; metadata?: { name?: string; resourceVersion?: string } };
}

class WatchStream {
  readonly events: WatchEvent[] = [];
  ended = false;
  statusCode = 0;
  readonly #req: ClientRequest;

  constructor(path: string) {
    let buf = '';
    this.#req = request(new URL(path, cluster.url), { ca: cluster.caCertPem, headers: { authorization: `Bearer ${cluster.adminToken}` } }, (res) => {
      this.statusCode = res.statusCode ?? 0;
      res.on('data', (d: Buffer) => {
        buf += d.toString();
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim()) this.events.push(JSON.parse(line) as WatchEvent);
        }
      });
      res.on('close', () => (this.ended = true));
      res.on('error', () => (this.ended = true));
    });
    this.#req.on('error', () => (this.ended = true));
    this.#req.end();
  }

  named(): string[] {
    return this.events.filter((e) => e.type !== 'BOOKMARK').map((e) => `${e.type} ${e.object.metadata?.name ?? e.object.code}`);
  }

  async until(pred: (s: WatchStream) => boolean): Promise<void> {
    for (let i = 0; i < 2000 && !pred(this); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(pred(this), `condition not reached; events: ${JSON.stringify(this.named())}`);
  }

  close(): void {
    this.#req.destroy();
  }
}

const podBody = (name: string, phaseLabel = 'a') => ({ metadata: { name, labels: { tier: phaseLabel } }, spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'i' }] } });

test('watch from a resourceVersion replays exactly the later events; without one it starts with the current state', async () => {
  const { core } = adminClient(cluster);
  await core.createNamespace({ body: { metadata: { name: 'w1' } } });
  const first = await core.createNamespacedPod({ namespace: 'w1', body: podBody('p1') });
  const rv1 = first.metadata!.resourceVersion!;
  await core.createNamespacedPod({ namespace: 'w1', body: podBody('p2') });
  await core.deleteNamespacedPod({ namespace: 'w1', name: 'p1' });

  const replay = new WatchStream(`/api/v1/namespaces/w1/pods?watch=1&resourceVersion=${rv1}`);
  await replay.until((s) => s.named().length >= 2);
  assert.deepEqual(replay.named(), ['ADDED p2', 'DELETED p1']);
  const rvs = replay.events.map((e) => Number(e.object.metadata?.resourceVersion));
  assert.ok(rvs[0]! > Number(rv1) && rvs[1]! > rvs[0]!, 'resourceVersions increase');
  assert.equal(replay.events[0]!.object.kind, 'Pod');

  const fresh = new WatchStream('/api/v1/namespaces/w1/pods?watch=true');
  await fresh.until((s) => s.named().length >= 1);
  assert.deepEqual(fresh.named(), ['ADDED p2']);
  await core.createNamespacedPod({ namespace: 'w1', body: podBody('p3') });
  await fresh.until((s) => s.named().includes('ADDED p3'));
  replay.close();
  fresh.close();
});

test('selectors see an object leave and enter the selection as DELETED and ADDED', async () => {
  const { core } = adminClient(cluster);
  await core.createNamespace({ body: { metadata: { name: 'w2' } } });
  await core.createNamespacedPod({ namespace: 'w2', body: podBody('p', 'a') });
  const byLabel = new WatchStream('/api/v1/namespaces/w2/pods?watch=1&labelSelector=tier%3Da');
  const byPhase = new WatchStream('/api/v1/namespaces/w2/pods?watch=1&fieldSelector=status.phase%3DRunning');
  await byLabel.until((s) => s.named().length === 1);
  await patchLabels('w2', 'p', { tier: 'b' });
  await byLabel.until((s) => s.named().length === 2);
  await patchLabels('w2', 'p', { tier: 'a' });
  await byLabel.until((s) => s.named().length === 3);
  assert.deepEqual(byLabel.named(), ['ADDED p', 'DELETED p', 'ADDED p']);

  const pod = await core.readNamespacedPod({ namespace: 'w2', name: 'p' });
  await core.replaceNamespacedPodStatus({ namespace: 'w2', name: 'p', body: { ...pod, status: { phase: 'Running', podIP: '10.0.0.9' } } });
  await byPhase.until((s) => s.named().length === 1);
  assert.deepEqual(byPhase.named(), ['ADDED p']);
  byLabel.close();
  byPhase.close();
});

async function patchLabels(ns: string, name: string, labels: Record<string, string>): Promise<void> {
  const r = await fetchAdmin('PATCH', `/api/v1/namespaces/${ns}/pods/${name}`, JSON.stringify({ metadata: { labels } }), 'application/strategic-merge-patch+json');
  assert.equal(r.code, 200, r.text);
}

function fetchAdmin(method: string, path: string, body?: string, contentType = 'application/json', token = cluster.adminToken): Promise<{ code: number; text: string; headers: Record<string, unknown> }> {
  return rawRequest(cluster, method, path, { token, ...(body !== undefined ? { body, contentType } : {}) });
}

test('bookmarks carry the current resourceVersion when asked for', async () => {
  const s = new WatchStream('/api/v1/namespaces/w1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=' + cluster.resourceVersion);
  await s.until((w) => w.events.some((e) => e.type === 'BOOKMARK'));
  const bm = s.events.find((e) => e.type === 'BOOKMARK')!;
  assert.equal(bm.object.kind, 'Pod');
  assert.equal(Number(bm.object.metadata?.resourceVersion), cluster.resourceVersion);
  s.close();
  const none = new WatchStream('/api/v1/namespaces/w1/pods?watch=1&resourceVersion=' + cluster.resourceVersion);
  await adminClient(cluster).core.createNamespacedPod({ namespace: 'w1', body: podBody('marker') });
  await none.until((w) => w.named().includes('ADDED marker'));
  assert.ok(!none.events.some((e) => e.type === 'BOOKMARK'), 'no bookmarks unless allowWatchBookmarks');
  none.close();
});

test('watch-list: sendInitialEvents streams the current state, then an initial-events-end bookmark', async () => {
  const s = new WatchStream('/api/v1/namespaces/w1/pods?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan');
  await s.until((w) => w.events.some((e) => e.type === 'BOOKMARK'));
  const end = s.events.findIndex((e) => e.type === 'BOOKMARK');
  assert.ok(end > 0 && s.events.slice(0, end).every((e) => e.type === 'ADDED'));
  const bookmark = s.events[end]!.object as { metadata?: { annotations?: Record<string, string>; resourceVersion?: string } };
  assert.equal(bookmark.metadata?.annotations?.['k8s.io/initial-events-end'], 'true');
  s.close();
  const bad = await fetchAdmin('GET', '/api/v1/namespaces/w1/pods?watch=1&sendInitialEvents=true');
  assert.equal(bad.code, 422);
});

test('after compaction a watch from an older resourceVersion gets a 410 Expired ERROR event', async () => {
  const old = cluster.resourceVersion;
  await adminClient(cluster).core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'bump' } } });
  cluster.faults.compact();
  const s = new WatchStream(`/api/v1/pods?watch=1&resourceVersion=${old}`);
  await s.until((w) => w.ended);
  assert.equal(s.statusCode, 200);
  assert.equal(s.events.length, 1);
  assert.equal(s.events[0]!.type, 'ERROR');
  assert.equal(s.events[0]!.object.code, 410);
  assert.equal(s.events[0]!.object.reason, 'Expired');
  assert.match(s.events[0]!.object.message ?? '', new RegExp(`^too old resource version: ${old} \\(\\d+\\)$`));
  const current = new WatchStream(`/api/v1/pods?watch=1&resourceVersion=${cluster.resourceVersion}`);
  await adminClient(cluster).core.createNamespacedPod({ namespace: 'w1', body: podBody('after-compaction') });
  await current.until((w) => w.named().includes('ADDED after-compaction'));
  current.close();
});

test('faults: dropped watches, N x 429 with Retry-After, N x 500, latency, via the handle and the admin endpoint', async () => {
  const s = new WatchStream('/api/v1/pods?watch=1');
  await s.until((w) => w.events.length > 0);
  assert.ok(cluster.faults.dropWatches() >= 1);
  await s.until((w) => w.ended);

  cluster.faults.failWith429(2, { retryAfterSeconds: 7, match: { path: '/configmaps' } });
  const a = await fetchAdmin('GET', '/api/v1/namespaces/default/configmaps');
  const b = await fetchAdmin('GET', '/api/v1/namespaces/default/configmaps');
  const other = await fetchAdmin('GET', '/api/v1/namespaces/default/secrets');
  const c = await fetchAdmin('GET', '/api/v1/namespaces/default/configmaps');
  assert.deepEqual([a.code, b.code, other.code, c.code], [429, 429, 200, 200]);
  assert.equal(a.headers['retry-after'], '7');
  const status = JSON.parse(a.text) as { reason: string; details: { retryAfterSeconds: number } };
  assert.equal(status.reason, 'TooManyRequests');
  assert.equal(status.details.retryAfterSeconds, 7);

  const admin = await fetchAdmin('POST', '/devcluster/faults', JSON.stringify({ fail500: { count: 1 }, latencyMs: 1 }));
  assert.equal(admin.code, 200, admin.text);
  const failed = await fetchAdmin('GET', '/api/v1/namespaces');
  assert.equal(failed.code, 500);
  assert.equal((JSON.parse(failed.text) as { reason: string }).reason, 'InternalError');
  assert.equal((await fetchAdmin('GET', '/api/v1/namespaces')).code, 200);
  assert.equal((await fetchAdmin('POST', '/devcluster/faults', JSON.stringify({ clear: true }))).code, 200);
  assert.equal((await fetchAdmin('POST', '/devcluster/faults', JSON.stringify({ latencyMs: -1 }))).code, 400);
  assert.ok(cluster.faults.injectedFailures >= 3);

  // Service-account callers may not touch the fault endpoint.
  await createPod(cluster, { namespace: 'w1', name: 'sa-pod', serviceAccountName: 'nobody' });
  const token = await serviceAccountToken(cluster, { namespace: 'w1', serviceAccountName: 'nobody' });
  const denied = await fetchAdmin('POST', '/devcluster/faults', JSON.stringify({ compact: true }), 'application/json', token);
  assert.equal(denied.code, 403);
  assert.equal((JSON.parse(denied.text) as { reason: string }).reason, 'Forbidden');
});

test('faults: a silenced watch stays open and sends nothing (no events, bookmarks or timeout end); new watches can be silent from the start', async () => {
  const { core } = adminClient(cluster);
  await core.createNamespace({ body: { metadata: { name: 'quiet' } } });
  const hung = new WatchStream('/api/v1/namespaces/quiet/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1');
  await hung.until((w) => w.events.some((e) => e.type === 'BOOKMARK'));
  assert.equal(cluster.faults.silenceWatches({ match: { path: '/namespaces/quiet/pods' } }), 1);
  const heard = hung.events.length;
  // Silent from the start, through the admin endpoint; the next watch after it is normal.
  const set = await fetchAdmin('POST', '/devcluster/faults', JSON.stringify({ silenceWatches: { newWatches: 1, path: '/namespaces/quiet/pods' } }));
  assert.equal(set.code, 200, set.text);
  const mute = new WatchStream('/api/v1/namespaces/quiet/pods?watch=1&allowWatchBookmarks=true');
  const control = new WatchStream('/api/v1/namespaces/quiet/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=1');
  try {
    await core.createNamespacedPod({ namespace: 'quiet', body: podBody('q1') });
    await control.until((w) => w.named().includes('ADDED q1') && w.events.filter((e) => e.type === 'BOOKMARK').length >= 3);
    // The control watch ends at its timeout; the silenced one, older, is still open and quiet.
    await control.until((w) => w.ended);
    assert.equal(hung.events.length, heard, 'nothing after the silence');
    assert.equal(hung.ended, false, 'a hung replica does not end the watch at timeoutSeconds');
    assert.equal(mute.statusCode, 200, 'the silent watch was accepted');
    assert.deepEqual(mute.events, [], 'not even the initial state');
  } finally {
    hung.close();
    mute.close();
    control.close();
  }
  for (let i = 0; i < 400 && cluster.faults.openWatches > 0; i++) await new Promise((r) => setTimeout(r, 5));
  assert.equal(cluster.faults.openWatches, 0, 'the client closing them frees them');
});

test('faults: an expired continue token (410), watch-only 429s, and the request log', async () => {
  const { core } = adminClient(cluster);
  await core.createNamespace({ body: { metadata: { name: 'pages' } } });
  for (const n of ['a', 'b', 'c']) await core.createNamespacedPod({ namespace: 'pages', body: podBody(n) });
  cluster.requestLog.clear();
  const first = await fetchAdmin('GET', '/api/v1/namespaces/pages/pods?limit=1');
  const token = (JSON.parse(first.text) as { metadata: { continue: string } }).metadata.continue;
  assert.ok(token);
  cluster.faults.expireContinue(1);
  const expiredPage = await fetchAdmin('GET', `/api/v1/namespaces/pages/pods?limit=1&continue=${token}`);
  assert.equal(expiredPage.code, 410);
  assert.equal((JSON.parse(expiredPage.text) as { reason: string }).reason, 'Expired');
  assert.equal((await fetchAdmin('GET', `/api/v1/namespaces/pages/pods?limit=1&continue=${token}`)).code, 200, 'one token expired, not all');
  assert.equal((await fetchAdmin('POST', '/devcluster/faults', JSON.stringify({ expireContinue: { count: 1 } }))).code, 200);
  assert.equal((await fetchAdmin('GET', '/api/v1/namespaces/pages/pods?limit=1')).code, 200, 'a first page carries no continue token');
  assert.equal((await fetchAdmin('GET', `/api/v1/namespaces/pages/pods?limit=1&continue=${token}`)).code, 410);

  assert.equal((await fetchAdmin('POST', '/devcluster/faults', JSON.stringify({ fail429: { count: 1, retryAfterSeconds: 8, path: '/namespaces/pages/pods', onlyWatch: true } }))).code, 200);
  assert.equal((await fetchAdmin('GET', '/api/v1/namespaces/pages/pods')).code, 200, 'a list is not a watch');
  const refused = await fetchAdmin('GET', '/api/v1/namespaces/pages/pods?watch=1');
  assert.equal(refused.code, 429);
  assert.equal(refused.headers['retry-after'], '8');

  const logged = cluster.requestLog.entries({ method: 'GET', path: '/api/v1/namespaces/pages/pods' });
  assert.deepEqual(
    logged.map((e) => [e.query.limit ?? '', e.query.continue === token, e.watch]),
    [
      ['1', false, false],
      ['1', true, false],
      ['1', true, false],
      ['1', false, false],
      ['1', true, false],
      ['', false, false],
      ['', false, true],
    ],
  );
});
