/**
 * The store's ordered index and list paging: the ordered keys agree with a sorted array under
 * random inserts and deletes, and paging with limit/continue while pods come and go returns
 * every pod that existed throughout exactly once, in key order, with an exact remainingItemCount.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OrderedKeys } from '../../src/devcluster/ordered-keys.js';
import { ObjectStore, type KubeObject } from '../../src/devcluster/store.js';
import { RestStorage } from '../../src/devcluster/rest.js';
import { findResource } from '../../src/devcluster/resources.js';
import { seededRng } from '../support/seeded-rng.js';

const POD = findResource('', 'v1', 'pods')!;
const NAMESPACES = ['a', 'a-b', 'b', 'kube-system'];

function sortedInsert(a: string[], k: string): void {
  if (a.includes(k)) return;
  a.push(k);
  a.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
}

test('ordered keys agree with a sorted array under random adds and deletes (chunks split and empty)', () => {
  for (const seed of [1, 2, 3]) {
    const rng = seededRng(seed);
    const keys = new OrderedKeys();
    const ref: string[] = [];
    for (let step = 0; step < 6000; step++) {
      const k = `ns${Math.floor(rng() * 5)}/pod-${Math.floor(rng() * 2500)}`;
      if (rng() < 0.65) {
        assert.equal(keys.add(k), !ref.includes(k), `seed ${seed} step ${step} add ${k}`);
        sortedInsert(ref, k);
      } else {
        const had = ref.indexOf(k);
        assert.equal(keys.delete(k), had >= 0, `seed ${seed} step ${step} delete ${k}`);
        if (had >= 0) ref.splice(had, 1);
      }
      if (step % 500 === 499) {
        assert.equal(keys.size, ref.length);
        assert.deepEqual([...keys.from('')], ref, `seed ${seed}: full order`);
        const probe = `ns${Math.floor(rng() * 5)}/pod-${Math.floor(rng() * 2500)}`;
        const below = ref.filter((x) => x < probe).length;
        assert.equal(keys.rank(probe), below, `seed ${seed}: rank ${probe}`);
        assert.deepEqual([...keys.from(probe)], ref.slice(below), `seed ${seed}: from ${probe}`);
        assert.deepEqual([...keys.from(probe, true)], ref.filter((x) => x > probe), `seed ${seed}: after ${probe}`);
      }
    }
  }
});

function pod(ns: string, name: string, app: string): KubeObject {
  return { metadata: { namespace: ns, name, uid: `${ns}-${name}`, labels: { app } }, spec: { nodeName: 'n1', serviceAccountName: 'default' }, status: { phase: 'Running' } };
}

function setup(): { store: ObjectStore; rest: RestStorage } {
  const store = new ObjectStore();
  const rest = new RestStorage({ store, now: () => 0, gracefulPodDeletion: () => false, rootCaPem: '' });
  return { store, rest };
}

interface PodList {
  items: KubeObject[];
  metadata: { continue?: string; remainingItemCount?: number };
}

function listPage(rest: RestStorage, ns: string | undefined, query: Record<string, string>): PodList {
  return rest.list(POD, ns, new URLSearchParams(query)).body as PodList;
}

const keyOf = (o: KubeObject) => `${o.metadata.namespace}/${o.metadata.name}`;

test('paging with continue while pods are created and deleted: every pod present throughout comes exactly once, in key order', () => {
  for (const seed of [7, 8, 9]) {
    const rng = seededRng(seed);
    const { store, rest } = setup();
    const live = new Set<string>();
    let made = 0;
    const add = () => {
      const ns = NAMESPACES[Math.floor(rng() * NAMESPACES.length)]!;
      const name = `p-${Math.floor(rng() * 1e6)}-${made++}`;
      store.create(POD, pod(ns, name, rng() < 0.5 ? 'web' : 'db'));
      live.add(`${ns}/${name}`);
    };
    for (let i = 0; i < 400; i++) add();
    const initial = new Set(live);
    const deleted = new Set<string>();
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = listPage(rest, undefined, { limit: '9', ...(token ? { continue: token } : {}) });
      assert.ok(page.items.length <= 9);
      seen.push(...page.items.map(keyOf));
      token = page.metadata.continue;
      const last = seen.at(-1);
      if (token !== undefined) {
        assert.equal(page.metadata.remainingItemCount, [...live].filter((k) => k > last!).length, `seed ${seed}: remainingItemCount`);
      } else assert.equal(page.metadata.remainingItemCount, undefined);
      // Between pages: some pods come, some go (ahead of the cursor and behind it).
      for (let i = 0; i < 4; i++) add();
      for (let i = 0; i < 3; i++) {
        const victims = [...live];
        const k = victims[Math.floor(rng() * victims.length)]!;
        const [ns, name] = k.split('/') as [string, string];
        store.delete(POD, ns, name);
        live.delete(k);
        deleted.add(k);
      }
    } while (token !== undefined);
    assert.equal(new Set(seen).size, seen.length, `seed ${seed}: no pod twice`);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i - 1]! < seen[i]!, `seed ${seed}: key order at ${i}`);
    const throughout = [...initial].filter((k) => !deleted.has(k));
    for (const k of throughout) assert.ok(seen.includes(k), `seed ${seed}: ${k} existed throughout but was skipped`);
  }
});

test('a namespace page stays in its namespace; selectors page over matches only, without remainingItemCount', () => {
  const { store, rest } = setup();
  for (const ns of NAMESPACES) for (let i = 0; i < 30; i++) store.create(POD, pod(ns, `p${String(i).padStart(2, '0')}`, i % 3 === 0 ? 'web' : 'db'));
  const seen: string[] = [];
  let token: string | undefined;
  do {
    const page = listPage(rest, 'a', { limit: '4', ...(token ? { continue: token } : {}) });
    seen.push(...page.items.map(keyOf));
    token = page.metadata.continue;
  } while (token !== undefined);
  assert.deepEqual(seen, Array.from({ length: 30 }, (_, i) => `a/p${String(i).padStart(2, '0')}`), "namespace a only (not a-b's pods)");
  const webs: string[] = [];
  token = undefined;
  do {
    const page = listPage(rest, undefined, { limit: '7', labelSelector: 'app=web', ...(token ? { continue: token } : {}) });
    assert.ok(page.items.every((o) => o.metadata.labels?.app === 'web'));
    if (page.metadata.continue !== undefined) assert.equal(page.items.length, 7, 'a full page of matches before a continue token');
    assert.equal(page.metadata.remainingItemCount, undefined);
    webs.push(...page.items.map(keyOf));
    token = page.metadata.continue;
  } while (token !== undefined);
  assert.equal(webs.length, NAMESPACES.length * 10);
  assert.equal(store.count(POD), 120);
});

test('a JSON list page from the cached item texts is byte for byte the serialized list, through creates, updates and deletes', async () => {
  const { createServer } = await import('node:http');
  const { sendJson, sendJsonList } = await import('../../src/devcluster/http-io.js');
  const { store, rest } = setup();
  const server = createServer((req, res) => {
    const url = new URL(req.url!, 'http://x');
    const ns = url.searchParams.get('ns') ?? undefined;
    if (url.pathname === '/json') {
      const r = rest.listJson(POD, ns, url.searchParams);
      sendJsonList(res, r.code, r.envelope, r.items);
    } else {
      const r = rest.list(POD, ns, url.searchParams);
      sendJson(res, r.code, r.body);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const fetchBoth = async (query: string): Promise<[string, string]> => {
    const get = async (path: string): Promise<string> => {
      const r = await fetch(`http://127.0.0.1:${port}${path}?${query}`);
      const text = await r.text();
      assert.equal(Number(r.headers.get('content-length')), Buffer.byteLength(text), `${path}?${query}: content-length`);
      return text;
    };
    return [await get('/json'), await get('/object')];
  };
  try {
    const rng = seededRng(7);
    for (let step = 0; step < 400; step++) {
      const ns = NAMESPACES[Math.floor(rng() * NAMESPACES.length)]!;
      const name = `p-${Math.floor(rng() * 60)}`;
      const cur = store.get(POD, ns, name);
      const r = rng();
      if (!cur) store.create(POD, { apiVersion: 'v1', kind: 'Pod', ...pod(ns, name, r < 0.5 ? 'x' : 'y'), note: 'é ✓ "quoted"' } as KubeObject);
      else if (r < 0.7) store.update(POD, { ...cur, metadata: { ...cur.metadata, labels: { app: rng() < 0.5 ? 'x' : 'z' } }, status: { phase: 'Succeeded', step } });
      else store.delete(POD, ns, name);
      if (step % 50 !== 49) continue;
      let cont = '';
      for (;;) {
        const [json, obj] = await fetchBoth(`limit=7${cont ? `&continue=${cont}` : ''}`);
        assert.equal(json, obj, `step ${step}: page`);
        const next = (JSON.parse(obj) as { metadata: { continue?: string } }).metadata.continue;
        if (!next) break;
        cont = next;
      }
      for (const q of ['', 'ns=a', 'ns=kube-system&limit=3', 'labelSelector=app%3Dz', 'fieldSelector=status.phase%3DSucceeded&limit=5', 'ns=b&labelSelector=app%21%3Dx']) {
        const [json, obj] = await fetchBoth(q);
        assert.equal(json, obj, `step ${step}: ${q}`);
      }
    }
  } finally {
    server.close();
  }
});
