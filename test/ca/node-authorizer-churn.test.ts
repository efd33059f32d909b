/**
 * The caller notes of the node authorizer (a caller's pod slot and stamp kept on the Caller
 * object) never change a decision. Seeded random churn — pods added, updated (phase, node,
 * service account), deleted, recreated under the same name with another UID (and back to an
 * older one), re-lists that drop pods, the whole index swapped as an informer's re-list does,
 * sync lost and regained — interleaved with calls from long-lived Caller objects: every answer
 * (the identity, or the error code) equals the answer of a fresh authorizer over a fresh compact
 * index built from the same pods, called with a fresh copy of the caller, and the answer of the
 * map index's by-name path. Copies of a Caller with another pod claim carry the original's note
 * along (an object spread copies it) and must not profit from it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1Pod } from '@kubernetes/client-node';
import { AuthenticatedCaller, CompactPodIndex, InMemoryPodIndex, makeCaller, NodeAuthorizer, type Caller, type PodIndex, type PodInfo, type PodRef } from '../../src/ca/index.js';
import { podUid } from '../support/realistic-pods.js';
import { seededRng } from '../support/seeded-rng.js';

const TD = 'cluster.local';
const NODES = ['node-0', 'node-1', 'node-2', 'node-3', ''];
const PHASES = ['Running', 'Running', 'Pending', 'Succeeded', 'Failed', 'Unknown'];
const WORKLOAD_NS = ['a', 'b'];
const WORKLOAD_SA = ['s1', 's2', 's3', ''];
const AGENTS = ['ztunnel-0', 'ztunnel-1', 'ztunnel-2', 'ztunnel-3', 'ra-0'];
/** UIDs a pod name may get (recreation picks one; an older one may come back): UUIDs and one odd form. */
const uidsOf = (name: string, k: number) => [podUid(k * 3), podUid(k * 3 + 1), `odd-${name}`];

/** The informer's view: its compact index may be swapped for a new one (a re-list into a new store). */
class SwappableIndex implements PodIndex {
  current = new CompactPodIndex();
  synced = true;
  get slots() {
    return this.current.slots;
  }
  getPod(ref: PodRef) {
    return this.current.getPod(ref);
  }
  podsOnNode(key: Parameters<PodIndex['podsOnNode']>[0]) {
    return this.current.podsOnNode(key);
  }
  hasActivePodOnNode(key: Parameters<PodIndex['hasActivePodOnNode']>[0]) {
    return key.serviceAccountName !== '' && this.current.hasActivePodOnNode(key);
  }
}

const OPTIONS = { trustedNodeAccounts: ['istio-system/ztunnel'], trustedRegistrationAuthorities: ['istio-system/ra'], trustDomains: [TD] };

function answer(authz: NodeAuthorizer, caller: Caller, identity: string): string {
  try {
    return authz.authorize(caller, identity).id;
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

/** A copy of `caller` that can carry no note (a plain object: only an AuthenticatedCaller does). */
function fresh(caller: Caller): Caller {
  return { ...caller };
}

function slim(p: PodInfo): V1Pod {
  return { metadata: { namespace: p.namespace, name: p.name, uid: p.uid }, spec: { containers: [], serviceAccountName: p.serviceAccountName, nodeName: p.nodeName }, status: { phase: p.phase } } as V1Pod;
}

test('decisions with noted callers equal fresh decisions under random pod churn', () => {
  for (const seed of [101, 102, 103, 104]) {
    const rng = seededRng(seed);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)]!;
    const live = new SwappableIndex();
    const authz = new NodeAuthorizer({ ...OPTIONS, pods: live });
    const model = new Map<string, PodInfo>();
    const randomPod = (): PodInfo => {
      if (rng() < 0.4) {
        const k = Math.floor(rng() * AGENTS.length);
        const name = AGENTS[k]!;
        const own = name.startsWith('ra') ? 'ra' : 'ztunnel';
        return { namespace: 'istio-system', name, uid: rng() < 0.7 ? uidsOf(name, k)[0]! : pick(uidsOf(name, k)), serviceAccountName: rng() < 0.85 ? own : pick(['default', 'ztunnel', 'ra']), nodeName: pick(NODES), phase: pick(PHASES) };
      }
      const namespace = pick(WORKLOAD_NS);
      const name = `w-${Math.floor(rng() * 10)}`;
      return { namespace, name, uid: podUid(1000 + Math.floor(rng() * 50)), serviceAccountName: pick(WORKLOAD_SA), nodeName: pick(NODES), phase: pick(PHASES) };
    };
    const upsert = (p: PodInfo) => {
      model.set(`${p.namespace}/${p.name}`, p);
      live.current.upsert(p);
    };
    // Long-lived callers, as the token cache hands them out: per agent pod, one per UID it may have had.
    const callers: Caller[] = AGENTS.flatMap((name, k) =>
      uidsOf(name, k).map((podUid) => makeCaller({ namespace: 'istio-system', serviceAccount: name.startsWith('ra') ? 'ra' : 'ztunnel', podName: name, podUid, clusterId: 'Kubernetes', authenticator: 'tokenreview' })),
    );
    callers.push(makeCaller({ namespace: 'istio-system', serviceAccount: 'ztunnel', clusterId: 'Kubernetes', authenticator: 'jwt' }));
    callers.push(makeCaller({ namespace: 'a', serviceAccount: 's1', podName: 'w-1', podUid: podUid(1001), clusterId: 'Kubernetes', authenticator: 'jwt' }));
    const identities = [...WORKLOAD_NS.flatMap((ns) => WORKLOAD_SA.filter((sa) => sa !== '').map((sa) => `spiffe://${TD}/ns/${ns}/sa/${sa}`)), `spiffe://${TD}/ns/istio-system/sa/ztunnel`, `spiffe://${TD}/ns/c/sa/never`, 'spiffe://other.td/ns/a/sa/s1', 'not-spiffe'];
    AGENTS.forEach((name, k) => upsert({ namespace: 'istio-system', name, uid: uidsOf(name, k)[0]!, serviceAccountName: name.startsWith('ra') ? 'ra' : 'ztunnel', nodeName: NODES[k % 4]!, phase: 'Running' }));
    for (let i = 0; i < 30; i++) upsert(randomPod());
    const outcomes = new Map<string, number>();
    let calls = 0;
    let noted = 0;
    for (let step = 0; step < 2500; step++) {
      const r = rng();
      if (r < 0.3) upsert(randomPod());
      else if (r < 0.4) {
        const victim = pick([...model.values()]);
        if (victim) {
          model.delete(`${victim.namespace}/${victim.name}`);
          live.current.remove(victim);
          // An agent pod is mostly recreated at once (a new UID, often a new slot).
          if (victim.namespace === 'istio-system' && rng() < 0.7) upsert({ ...victim, uid: pick(uidsOf(victim.name, AGENTS.indexOf(victim.name))) });
        }
      } else if (r < 0.49) {
        // A re-list naming all but a few pods (and one changed), into the same store.
        live.current.beginList();
        for (const p of [...model.values()]) {
          if (rng() < 0.1) model.delete(`${p.namespace}/${p.name}`);
          else if (rng() < 0.1) {
            const changed = { ...p, phase: pick(PHASES) };
            model.set(`${p.namespace}/${p.name}`, changed);
            live.current.listed(slim(changed));
          } else live.current.listed(slim(p));
        }
        live.current.endList();
      } else if (r < 0.51) {
        // A re-list into a new store: slot numbers start over.
        const next = new CompactPodIndex();
        for (const p of [...model.values()].reverse()) next.upsert(p);
        live.current = next;
      } else if (r < 0.52) live.synced = false;
      else if (!live.synced && r < 0.8) live.synced = true;
      const reference = new CompactPodIndex({ synced: live.synced });
      const byName = new InMemoryPodIndex({ synced: live.synced });
      for (const p of model.values()) {
        reference.upsert(p);
        byName.upsert(p);
      }
      const referenceAuthz = new NodeAuthorizer({ ...OPTIONS, pods: reference });
      const byNameAuthz = new NodeAuthorizer({ ...OPTIONS, pods: byName });
      for (let c = 0; c < 10; c++) {
        const held = pick(callers);
        // Now and then a copy with another pod claim that carries the held one's note fields along (a plain object).
        const caller = rng() < 0.1 ? { ...held, ...(rng() < 0.5 ? { podUid: pick(callers).podUid! } : { podName: pick(AGENTS) }) } : held;
        const identity = pick(identities);
        if (caller instanceof AuthenticatedCaller && caller.noteAuthorizer === authz.id && caller.noteIndex === live.current.instance && live.current.stamp(caller.noteSlot) === caller.noteStamp) noted++;
        const got = answer(authz, caller, identity);
        const want = answer(referenceAuthz, fresh(caller), identity);
        const what = `seed ${seed} step ${step}: ${caller.podName ?? '(unbound)'} ${caller.podUid ?? ''} asks ${identity}`;
        assert.equal(got, want, `${what}: noted vs fresh compact`);
        assert.equal(answer(byNameAuthz, fresh(caller), identity), want, `${what}: by-name path vs compact`);
        outcomes.set(got, (outcomes.get(got) ?? 0) + 1);
        calls++;
      }
    }
    // The run exercised what it claims: warm notes, and every kind of answer.
    assert.ok(noted > calls / 25, `seed ${seed}: ${noted} of ${calls} calls came with a note still valid`);
    for (const code of ['ERR_CA_NO_POD_ON_NODE', 'ERR_CA_CALLER_POD_MISSING', 'ERR_CA_CALLER_POD_UID_MISMATCH', 'ERR_CA_CALLER_POD_SA_MISMATCH', 'ERR_CA_POD_INDEX_NOT_SYNCED', 'ERR_CA_CALLER_NOT_POD_BOUND', 'ERR_CA_NODE_NOT_TRUSTED', 'ERR_CA_IDENTITY_INVALID']) {
      assert.ok((outcomes.get(code) ?? 0) > 0, `seed ${seed}: some call ended in ${code}`);
    }
    assert.ok([...outcomes.keys()].filter((k) => k.startsWith('spiffe://')).reduce((n, k) => n + outcomes.get(k)!, 0) > calls / 40, `seed ${seed}: calls were allowed too`);
  }
});

test("a noted caller follows its node's table through every move: a place kept past a move would still see deleted pods", () => {
  const index = new CompactPodIndex();
  const authz = new NodeAuthorizer({ ...OPTIONS, pods: index });
  const agentUid = podUid(7);
  index.upsert({ namespace: 'istio-system', name: 'ztunnel-n1', uid: agentUid, serviceAccountName: 'ztunnel', nodeName: 'n1', phase: 'Running' });
  const caller = makeCaller({ namespace: 'istio-system', serviceAccount: 'ztunnel', podName: 'ztunnel-n1', podUid: agentUid, clusterId: 'Kubernetes', authenticator: 'tokenreview' });
  const id = (sa: string) => `spiffe://${TD}/ns/a/sa/${sa}`;
  const workload = (k: number, sa: string) => ({ namespace: 'a', name: `w-${k}`, uid: podUid(100 + k), serviceAccountName: sa, nodeName: 'n1', phase: 'Running' });
  let k = 0;
  // Each round adds accounts to n1 until its table has moved (grown) again, calls in between, then deletes the
  // round's first account: its entry stays behind in the region the table left, so only the table's new place says no.
  for (let round = 0; round < 4; round++) {
    const first = `r${round}-0`;
    for (let j = 0; j < 6 * (round + 1); j++) {
      const sa = `r${round}-${j}`;
      index.upsert(workload(k++, sa));
      assert.equal(answer(authz, caller, id(sa)), id(sa), `round ${round}: ${sa} runs on n1`);
    }
    index.remove({ namespace: 'a', name: `w-${k - 6 * (round + 1)}` });
    assert.equal(answer(authz, caller, id(first)), 'ERR_CA_NO_POD_ON_NODE', `round ${round}: ${first} was deleted`);
  }
  assert.ok(caller instanceof AuthenticatedCaller && caller.noteAuthorizer === authz.id, 'the answers came through the note');
});
