/**
 * Self-signed replicas (SelfSignedSigner in process, each with its own store client) against a
 * real devcluster Secret, in the interleavings that decide which root they serve:
 *  - a replica whose read of the (absent) Secret is slow: another creates meanwhile; the slow
 *    one's create gets 409 and it reads back and serves the winner's root, never its own;
 *  - the Secret deleted while replicas sign: at their next poll they store the root they serve
 *    again (conflict-checked), so a replica started afterwards loads that root instead of making
 *    a new one; two replicas restoring at once end with one stored root, the one both serve;
 *  - a replica started while the Secret is gone stores a new root first: the running replicas'
 *    restore gets 409 and they adopt it.
 * The interleavings are forced with gates on the store calls, not with timing.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeClock } from '../support/fake-clock.js';
import { createLogger } from '../../src/core/log.js';
import { CA_CERT_KEY, kubeCaSecretStore, SelfSignedSigner, type CaSecretStore } from '../../src/ca/index.js';
import { adminClient, createNamespace, startCluster, type Clients, type DevCluster } from '../support/cluster.js';

const SECRET = 'istio-ca-secret';

let cluster: DevCluster;
let api: Clients;

before(async () => {
  cluster = await startCluster({ simulateKubelet: false });
  api = adminClient(cluster);
});
after(async () => {
  await cluster?.close();
});

/** A gate: `wait()` resolves once `open()` was called. */
function gate(): { wait: () => Promise<void>; open: () => void } {
  let open!: () => void;
  const p = new Promise<void>((resolve) => (open = resolve));
  return { wait: () => p, open };
}

/** The real store, with each call's outcome recorded and an optional hold after the first read's answer. */
function recordingStore(namespace: string, calls: string[], holdFirstRead?: { readonly answered: () => void; readonly release: Promise<void> }): CaSecretStore {
  const real = kubeCaSecretStore({ kubeConfig: api.kc, namespace, name: SECRET });
  let reads = 0;
  return {
    location: real.location,
    async read(signal) {
      const r = await real.read(signal);
      calls.push(`read:${r ? 'found' : 'absent'}`);
      if (holdFirstRead && reads++ === 0) {
        holdFirstRead.answered();
        await holdFirstRead.release;
      }
      return r;
    },
    async create(ca, signal) {
      const r = await real.create(ca, signal);
      calls.push(`create:${r}`);
      return r;
    },
  };
}

function replica(store: CaSecretStore, logs: string[] = []): SelfSignedSigner {
  return new SelfSignedSigner({
    store,
    trustDomain: 'cluster.local',
    keyType: 'ec',
    rootTtlSeconds: 365 * 86_400,
    clock: new FakeClock(Date.now()),
    logger: createLogger({ level: 'debug', sink: (l) => logs.push(l) }),
    maxTtlSeconds: 86_400,
  });
}

async function storedRoot(namespace: string): Promise<string | undefined> {
  try {
    const s = await api.core.readNamespacedSecret({ namespace, name: SECRET });
    return Buffer.from(s.data![CA_CERT_KEY]!, 'base64').toString('utf8');
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

test('a slow reader: its read answers "absent", another replica creates meanwhile; its create gets 409 and it serves the winner’s root', async (t) => {
  const ns = 'slow-reader';
  await createNamespace(cluster, ns);
  const answered = gate();
  const release = gate();
  const slowCalls: string[] = [];
  const slow = replica(recordingStore(ns, slowCalls, { answered: answered.open, release: release.wait() }));
  const fastCalls: string[] = [];
  const fast = replica(recordingStore(ns, fastCalls));
  t.after(() => Promise.all([slow.close(), fast.close()]));

  const slowLoad = slow.load();
  await answered.wait(); // the slow replica saw no Secret...
  await fast.load(); // ...and before its answer arrives, the other creates one
  assert.deepEqual(fastCalls, ['read:absent', 'create:created']);
  release.open();
  await slowLoad;
  assert.deepEqual(slowCalls, ['read:absent', 'create:exists', 'read:found'], 'the loser read the winner’s Secret back');
  assert.equal(fast.origin, 'created');
  assert.equal(slow.origin, 'loaded');
  const stored = await storedRoot(ns);
  assert.deepEqual(slow.roots(), [stored]);
  assert.deepEqual(fast.roots(), [stored]);
});

test('the Secret deleted while two replicas sign: both store the root they serve again (one create wins), and a replica started afterwards loads it', async (t) => {
  const ns = 'deleted-while-signing';
  await createNamespace(cluster, ns);
  const aCalls: string[] = [];
  const bCalls: string[] = [];
  const aLogs: string[] = [];
  const a = replica(recordingStore(ns, aCalls), aLogs);
  const b = replica(recordingStore(ns, bCalls));
  t.after(() => Promise.all([a.close(), b.close()]));
  await a.load();
  await b.load();
  const root = await storedRoot(ns);
  assert.deepEqual(b.roots(), [root]);

  await api.core.deleteNamespacedSecret({ namespace: ns, name: SECRET });
  aCalls.length = 0;
  bCalls.length = 0;
  await Promise.all([a.reload(), b.reload()]); // their polls, at once
  assert.equal(await storedRoot(ns), root, 'the root in use is stored again');
  const creates = [...aCalls, ...bCalls].filter((c) => c.startsWith('create:')).sort();
  assert.deepEqual(creates, ['create:created', 'create:exists'], 'both tried the conflict-checked create; one won');
  assert.deepEqual(a.roots(), [root]);
  assert.deepEqual(b.roots(), [root]);
  assert.ok(aLogs.every((l) => !l.includes('BEGIN')), 'no PEM (and no key) in the logs');

  const c = replica(recordingStore(ns, []));
  t.after(() => c.close());
  await c.load();
  assert.equal(c.origin, 'loaded');
  assert.deepEqual(c.roots(), [root], 'the new replica serves the same root, not a new one');
});

test('a replica started while the Secret is gone stores a new root first: the running replica’s restore gets 409 and it adopts that root', async (t) => {
  const ns = 'deleted-new-replica-first';
  await createNamespace(cluster, ns);
  const aCalls: string[] = [];
  const a = replica(recordingStore(ns, aCalls));
  t.after(() => a.close());
  await a.load();
  const old = await storedRoot(ns);
  await api.core.deleteNamespacedSecret({ namespace: ns, name: SECRET });

  const c = replica(recordingStore(ns, []));
  t.after(() => c.close());
  await c.load();
  assert.equal(c.origin, 'created');
  const fresh = await storedRoot(ns);
  assert.notEqual(fresh, old);

  aCalls.length = 0;
  await a.reload();
  assert.deepEqual(a.roots(), [fresh], 'the running replica serves the stored root now');
  assert.deepEqual(c.roots(), [fresh]);
  assert.equal(await storedRoot(ns), fresh);
});
