/**
 * The compact pod index answers as the map-based index does on a generated cluster under
 * random churn (pods added, moved between nodes, changing phase, deleted, odd UIDs; looked up
 * between the changes, so an answer kept past its pod's change would show); as the
 * informer's store it drops what a re-list did not name and applies watch events; a watched
 * slot's writes, and only those, move the watch epoch; and the streaming pod page decoder gives
 * exactly the slim pods JSON.parse would.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { CompactPodIndex } from '../../src/ca/index.js';
import { InMemoryPodIndex, toPodInfo, type PodInfo } from '../../src/ca/index.js';
import { SlimPodPageDecoder, slimPod } from '../../src/kube/slim-pod-page.js';
import { realisticPod, nodeName, podUid, type ClusterShape } from '../support/realistic-pods.js';
import { seededRng } from '../support/seeded-rng.js';

const PHASES = ['Pending', 'Running', 'Succeeded', 'Failed', 'Unknown', 'Weird'];

function sorted(pods: readonly PodInfo[]): PodInfo[] {
  return [...pods].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

test('the compact index answers as the map-based index on a generated cluster under churn', () => {
  for (const seed of [11, 12]) {
    const rng = seededRng(seed);
    const shape: ClusterShape = { pods: 4000, nodes: 40, namespaces: 6, accounts: 3 };
    const old = new InMemoryPodIndex();
    const compact = new CompactPodIndex();
    const names: PodInfo[] = [];
    for (let i = 0; i < shape.pods; i++) {
      const p = toPodInfo(realisticPod(i, shape) as V1Pod)!;
      const info = i % 97 === 0 ? { ...p, uid: `not-a-uuid-${i}` } : i % 101 === 0 ? { ...p, nodeName: '' } : i % 89 === 0 ? { ...p, uid: p.uid.toUpperCase() } : p;
      old.upsert(info);
      compact.upsert(info);
      names.push(info);
    }
    for (let step = 0; step < 6000; step++) {
      const base = names[Math.floor(rng() * names.length)]!;
      const r = rng();
      if (r < 0.25) {
        old.remove(base);
        compact.remove(base);
      } else {
        const moved: PodInfo = {
          ...base,
          nodeName: r < 0.5 ? nodeName(Math.floor(rng() * shape.nodes)) : base.nodeName,
          phase: PHASES[Math.floor(rng() * PHASES.length)]!,
          uid: r > 0.9 ? podUid(100000 + step) : base.uid,
          serviceAccountName: r > 0.95 ? '' : base.serviceAccountName,
        };
        old.upsert(moved);
        compact.upsert(moved);
      }
      // Lookups during the churn too: getPod keeps its answers per slot until the slot changes
      // (a pod replaced, removed, its slot reused by another), so a stale one would show here.
      assert.deepEqual(compact.getPod(base), old.getPod(base), `seed ${seed} step ${step}: getPod after the change`);
      const other = names[Math.floor(rng() * names.length)]!;
      assert.deepEqual(compact.getPod(other), old.getPod(other), `seed ${seed} step ${step}: getPod of another pod`);
    }
    assert.equal(compact.size, old.size, `seed ${seed}: size`);
    for (const p of names) assert.deepEqual(compact.getPod(p), old.getPod(p), `seed ${seed}: getPod ${p.namespace}/${p.name}`);
    assert.deepEqual(sorted(compact.all()), sorted(old.all()));
    const namespaces = [...new Set(names.map((p) => p.namespace))];
    const accounts = [...new Set(names.map((p) => p.serviceAccountName)), '', 'nobody'];
    let nonEmpty = 0;
    let active = 0;
    for (let n = 0; n < shape.nodes; n++) {
      for (const namespace of namespaces) {
        for (const serviceAccountName of accounts) {
          const key = { namespace, serviceAccountName, nodeName: nodeName(n) };
          const want = sorted(old.podsOnNode(key));
          assert.deepEqual(sorted(compact.podsOnNode(key)), want, `seed ${seed}: podsOnNode ${JSON.stringify(key)}`);
          assert.equal(compact.hasActivePodOnNode(key), old.hasActivePodOnNode(key), `seed ${seed}: hasActivePodOnNode ${JSON.stringify(key)}`);
          if (old.hasActivePodOnNode(key)) active++;
          if (want.length > 0) nonEmpty++;
        }
      }
    }
    assert.ok(nonEmpty > 100, 'the comparison saw populated nodes');
    assert.ok(active > 50 && active < nonEmpty, 'and nodes where only finished pods of an account are left');
    assert.deepEqual(compact.podsOnNode({ namespace: 'nope', serviceAccountName: 'x', nodeName: nodeName(1) }), []);
  }
});

test('as the informer store: a re-list drops the pods it did not name; watch events add, move and delete', () => {
  const idx = new CompactPodIndex({ what: 'watch /api/v1/pods' });
  const shape: ClusterShape = { pods: 50, nodes: 5, namespaces: 2, accounts: 2 };
  const pods = Array.from({ length: shape.pods }, (_, i) => slimPod(realisticPod(i, shape) as V1Pod));
  idx.beginList();
  for (const p of pods) idx.listed(p);
  idx.endList();
  assert.equal(idx.size, 50);
  idx.beginList();
  for (const p of pods.slice(10)) idx.listed(p);
  idx.endList();
  assert.equal(idx.size, 40, 'the ten pods the second list did not name are gone');
  assert.equal(idx.get(pods[0]!.metadata!.namespace, pods[0]!.metadata!.name!), undefined);
  assert.equal(idx.get(pods[10]!.metadata!.namespace, pods[10]!.metadata!.name!)?.metadata?.uid, pods[10]!.metadata!.uid);

  const p = pods[20]!;
  const moved = { ...p, spec: { ...p.spec!, nodeName: 'elsewhere' }, metadata: { ...p.metadata, resourceVersion: '999' } } as V1Pod;
  assert.deepEqual(idx.apply({ type: 'MODIFIED', object: moved }), { resourceVersion: '999' });
  const ref = { namespace: p.metadata!.namespace!, serviceAccountName: p.spec!.serviceAccountName!, nodeName: 'elsewhere' };
  assert.deepEqual(idx.podsOnNode(ref).map((x) => x.name), [p.metadata!.name]);
  assert.ok(!idx.podsOnNode({ ...ref, nodeName: p.spec!.nodeName! }).some((x) => x.name === p.metadata!.name), 'no longer on the old node');
  assert.deepEqual(idx.apply({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '1000' } } }), { resourceVersion: '1000' });
  assert.deepEqual(idx.apply({ type: 'DELETED', object: { ...moved, metadata: { ...moved.metadata, resourceVersion: '1001' } } }), { resourceVersion: '1001' });
  assert.deepEqual(idx.podsOnNode(ref), []);
  assert.equal(idx.size, 39);
  assert.equal(idx.apply({ type: 'ERROR', object: { code: 410 } }), 'gone');
  assert.throws(() => idx.apply({ type: 'ERROR', object: { code: 500, reason: 'InternalError', message: 'boom' } }), (err: { code?: string }) => err.code === 'ERR_KUBE_API_STATUS');
});

test('the watch epoch moves on the next write of a watched slot, and only then', () => {
  const index = new CompactPodIndex();
  const pod = (name: string, nodeName: string, uid = podUid(name.length * 1000 + nodeName.length)): PodInfo => ({ namespace: 'istio-system', name, uid, serviceAccountName: 'ztunnel', nodeName, phase: 'Running' });
  index.upsert(pod('agent-a', 'n1'));
  index.upsert(pod('agent-b', 'n2'));
  index.upsert(pod('worker', 'n1'));
  const a = index.slotOf('istio-system', 'agent-a');
  const b = index.slotOf('istio-system', 'agent-b');
  const e0 = index.watchEpoch;
  // Writes before any watch, and of unwatched slots, leave it.
  index.upsert(pod('agent-a', 'n1'));
  index.watch(a);
  index.watch(a);
  index.upsert(pod('worker', 'n2'));
  index.upsert(pod('agent-b', 'n2'));
  index.remove({ namespace: 'istio-system', name: 'worker' });
  assert.equal(index.watchEpoch, e0);
  // The watched slot's next write moves it once; the mark is spent by that write.
  const stamp = index.stamp(a);
  index.upsert(pod('agent-a', 'n3'));
  assert.equal(index.watchEpoch, e0 + 1);
  assert.notEqual(index.stamp(a), stamp);
  index.upsert(pod('agent-a', 'n1'));
  assert.equal(index.watchEpoch, e0 + 1);
  // A watched slot that is removed moves it too; the slot a new pod then takes is not watched.
  index.watch(b);
  index.remove({ namespace: 'istio-system', name: 'agent-b' });
  assert.equal(index.watchEpoch, e0 + 2);
  index.upsert(pod('agent-c', 'n2'));
  assert.equal(index.slotOf('istio-system', 'agent-c'), b);
  index.upsert(pod('agent-c', 'n4'));
  assert.equal(index.watchEpoch, e0 + 2);
  // Out-of-range slots are ignored.
  index.watch(-1);
  index.watch(1 << 20);
  assert.equal(index.watchEpoch, e0 + 2);
});

test('the streaming pod page decoder equals JSON.parse + slimPod, whatever the chunking', () => {
  const shape: ClusterShape = { pods: 3, nodes: 2, namespaces: 2, accounts: 1 };
  const items = Array.from({ length: shape.pods }, (_, i) => realisticPod(i, shape));
  (items[1]!.metadata as Record<string, unknown>).name = 'escaped-\u00e9-"q"-\\';
  delete (items[2] as Record<string, unknown>).status;
  const list = { kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '4242', continue: 'tok', remainingItemCount: 7 }, items };
  const bytes = Buffer.from(JSON.stringify(list));
  const want = { items: items.map((p) => slimPod(p as V1Pod)), resourceVersion: '4242', continueToken: 'tok' };
  const decode = (cuts: number[]) => {
    const d = new SlimPodPageDecoder();
    let at = 0;
    for (const c of [...cuts, bytes.length]) {
      d.push(bytes.subarray(at, c));
      at = c;
    }
    return d.finish();
  };
  // JSON round trip drops the undefined fields slimPod leaves, as the wire would.
  const plain = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;
  assert.deepEqual(plain(decode([])), plain(want));
  for (let cut = 1; cut < bytes.length; cut += 1) assert.deepEqual(plain(decode([cut])), plain(want), `cut at ${cut}`);
  const last = new SlimPodPageDecoder();
  last.push(Buffer.from('{"kind":"PodList","metadata":{"resourceVersion":"5"},"items":[]}'));
  assert.deepEqual(last.finish(), { items: [], resourceVersion: '5', continueToken: undefined });
  const noItems = new SlimPodPageDecoder();
  noItems.push(Buffer.from('{"kind":"Status","code":200}'));
  assert.throws(() => noItems.finish(), { code: 'ERR_JSON_MALFORMED', offset: 0 }, 'a body without items is no list');
});
