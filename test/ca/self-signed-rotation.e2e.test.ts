/**
 * The self-signed CA's root rotation against a real devcluster Secret, on a fake clock: each
 * `rotate-root` step (the code the CLI runs) moves the stored CA through its phases and is
 * refused outside them; a write against a Secret that moved meanwhile is a conflict and writes
 * nothing; the running signer re-reads the Secret at its poll and answers with every trusted root
 * in the last element (openssl verifies a leaf with that bundle), signing with the new root after
 * `activate`; an unusable change is logged and the material in use kept.
 */
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  applyRotationStep,
  kubeCaSecretStore,
  rotateStoredRoot,
  rotationPhase,
  SelfSignedSigner,
  type StoredCa,
} from '../../src/ca/index.js';
import { createLogger } from '../../src/core/log.js';
import { createRootCa, exportPkcs8Pem } from '../../src/pki/index.js';
import { adminClient, createNamespace, startCluster, type Clients, type DevCluster } from '../support/cluster.js';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';
import { opensslMissing } from '../support/tools.js';
import { newCsr, opensslVerifyChain } from './support/pki-fixtures.js';

const SECRET = 'istio-ca-secret';
const ID = 'spiffe://cluster.local/ns/default/sa/sleep';
const POLL_MS = 1000;
const ROOT_OPTIONS = { trustDomain: 'cluster.local', keyType: 'ec' as const, rootTtlSeconds: 365 * 86400 };

let cluster: DevCluster;
let api: Clients;

before(async () => {
  cluster = await startCluster({ simulateKubelet: false });
  api = adminClient(cluster);
});

after(async () => {
  await cluster?.close();
});

const certCount = (pem: string | undefined) => pem?.match(/BEGIN CERTIFICATE/g)?.length ?? 0;

async function single(nowMs: number): Promise<StoredCa> {
  const root = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 365 * 86400, nowMs });
  return { certPem: root.pem, keyPem: exportPkcs8Pem(root.privateKey) };
}

describe('self-signed root rotation', () => {
  it('prepare -> activate -> finish (and rollback): phases, roots, and refusals outside each phase', async () => {
    const nowMs = Date.now();
    const start = await single(nowMs);
    const opts = { ...ROOT_OPTIONS, nowMs };
    assert.equal(rotationPhase(start), 'single');
    for (const step of ['activate', 'finish', 'rollback'] as const) {
      await assert.rejects(applyRotationStep(start, step, opts), { code: 'ERR_CA_ROTATION_STEP' }, step);
    }
    const prepared = await applyRotationStep(start, 'prepare', opts);
    assert.equal(rotationPhase(prepared), 'prepared');
    assert.equal(prepared.certPem, start.certPem, 'the old root still signs');
    assert.equal(certCount(prepared.rootsPem), 2);
    assert.ok(prepared.next && prepared.rootsPem!.includes(prepared.next.certPem.trim()));
    await assert.rejects(applyRotationStep(prepared, 'prepare', opts), { code: 'ERR_CA_ROTATION_STEP' });
    await assert.rejects(applyRotationStep(prepared, 'finish', opts), { code: 'ERR_CA_ROTATION_STEP' });
    const rolledBack = await applyRotationStep(prepared, 'rollback', opts);
    assert.equal(rotationPhase(rolledBack), 'single');
    assert.equal(new X509Certificate(rolledBack.rootsPem!).fingerprint256, new X509Certificate(start.certPem).fingerprint256);

    const overlap = await applyRotationStep(prepared, 'activate', opts);
    assert.equal(rotationPhase(overlap), 'overlap');
    assert.equal(overlap.certPem, prepared.next!.certPem, 'the new root signs');
    assert.equal(certCount(overlap.rootsPem), 2);
    await assert.rejects(applyRotationStep(overlap, 'prepare', opts), { code: 'ERR_CA_ROTATION_STEP' });
    await assert.rejects(applyRotationStep(overlap, 'rollback', opts), { code: 'ERR_CA_ROTATION_STEP' });
    const done = await applyRotationStep(overlap, 'finish', opts);
    assert.equal(rotationPhase(done), 'single');
    assert.equal(new X509Certificate(done.rootsPem!).fingerprint256, new X509Certificate(overlap.certPem).fingerprint256);
  });

  it('a running signer follows each step at its poll; every trusted root goes out last; a stale write is a conflict; a bad change is kept out', { skip: opensslMissing() }, async () => {
    const namespace = 'rotation-live';
    await createNamespace(cluster, namespace);
    const clock = new FakeClock(Date.now());
    const logs: string[] = [];
    const store = kubeCaSecretStore({ kubeConfig: api.kc, namespace, name: SECRET });
    const signer = new SelfSignedSigner({
      store,
      trustDomain: 'cluster.local',
      keyType: 'ec',
      rootTtlSeconds: 365 * 86_400,
      pollIntervalMs: POLL_MS,
      clock,
      logger: createLogger({ level: 'debug', sink: (l) => logs.push(l) }),
      maxTtlSeconds: 86_400,
    });
    try {
      await signer.start();
      assert.equal(signer.origin, 'created');
      const oldRoot = signer.roots()[0]!;
      /** Advances past one poll and waits for the signer to have read the Secret. */
      const poll = async (expectedLoads: number) => {
        await clock.waitForTimers(1);
        await clock.advance(POLL_MS);
        for (let i = 0; i < 400 && signer.loads < expectedLoads; i++) await new Promise((r) => setTimeout(r, 10));
        assert.equal(signer.loads, expectedLoads, 'the signer installed the change');
      };
      const issue = async () => (await signer.sign({ csrPem: await newCsr(ID), spiffeId: ID, ttlSeconds: 600 })).certChain;
      const opts = { ...ROOT_OPTIONS, nowMs: clock.now() };

      // A write against a Secret that moved since it was read is refused, nothing written.
      const stale = await store.read();
      await rotateStoredRoot(store, 'prepare', opts);
      assert.equal(await store.replace!({ ...stale!, rootsPem: stale!.certPem }), 'conflict');
      await poll(2);
      assert.equal(signer.roots().length, 2);
      const prepared = await issue();
      assert.equal(prepared.length, 2, '[leaf, root bundle]');
      assert.equal(certCount(prepared.at(-1)), 2, 'both roots in the last element');
      await opensslVerifyChain(prepared);
      assert.ok(new X509Certificate(prepared[0]!).verify(new X509Certificate(oldRoot).publicKey), 'the old root still signs');

      await rotateStoredRoot(store, 'activate', opts);
      await poll(3);
      const active = await issue();
      assert.equal(certCount(active.at(-1)), 2);
      assert.ok(!new X509Certificate(active[0]!).verify(new X509Certificate(oldRoot).publicKey), 'the new root signs');
      await opensslVerifyChain(active);

      // A change that fails the checks (root-cert.pem without the signing root) is kept out.
      const current = (await store.read())!;
      assert.equal(await store.replace!({ ...current, rootsPem: oldRoot }), 'replaced');
      await clock.waitForTimers(1);
      await clock.advance(POLL_MS);
      for (let i = 0; i < 400 && !logs.some((l) => l.includes('unusable; keeping the root in use')); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(logs.some((l) => l.includes('unusable; keeping the root in use')));
      assert.equal(signer.loads, 3);
      assert.equal(signer.roots().length, 2, 'the material in use is kept');
      // Put it right again (the same texts as installed: nothing to reload).
      assert.equal(await store.replace!({ ...(await store.read())!, rootsPem: current.rootsPem! }), 'replaced');

      const result = await rotateStoredRoot(store, 'finish', opts);
      assert.equal(result.phase, 'single');
      await poll(4);
      const finished = await issue();
      assert.equal(certCount(finished.at(-1)), 1, 'the old root is gone from the answers');
      assert.notEqual(new X509Certificate(finished.at(-1)!).fingerprint256, new X509Certificate(oldRoot).fingerprint256);
      await opensslVerifyChain(finished);
      assert.ok(!logs.some((l) => /PRIVATE KEY/.test(l)), 'no key in the logs');
    } finally {
      await signer.close();
      await flushMicrotasks();
    }
  });
});
