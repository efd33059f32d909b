/**
 * The trust bundle's ordering rules during a rotation, on a fake clock with real certificates: a
 * CA client signing with whatever material the test installs (roots, intermediates), certificate
 * managers holding several identities, and the bundle following them. Asserted after every
 * change: every leaf held verifies against the bundle served (node:crypto signatures through
 * pki's chain check), a dropped root goes only after the leaves under it were re-issued and had
 * the settle window to reach their streams, an added root is served at once, and `servable`
 * refuses a leaf the bundle does not verify.
 */
import assert from 'node:assert/strict';
import { X509Certificate, type KeyObject } from 'node:crypto';
import { describe, it } from 'node:test';
import { CertManager, TrustBundle, type CaClient, type TrustBundleObserver, type WorkloadCert } from '../../src/broker/index.js';
import { Secret } from '../../src/core/secret.js';
import {
  caKeyMaterial,
  createCsr,
  createIntermediateCa,
  createRootCa,
  exportPkcs8Der,
  FastLeafIssuer,
  generateKeyPair,
  type CaCertificate,
  type CaKeyMaterial,
} from '../../src/pki/index.js';
import { chainVerifies } from '../support/chain-verify.js';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';

const TD = 'cluster.local';
const id = (sa: string) => `spiffe://${TD}/ns/default/sa/${sa}`;
const SETTLE_MS = 1000;

/** A CA whose signing material the test swaps; each answer carries the roots it trusts now. */
class SwitchableCa implements CaClient {
  material: CaKeyMaterial;
  calls = 0;
  constructor(
    private readonly clock: FakeClock,
    material: CaKeyMaterial,
    /** One workload key for every leaf (made once: key generation is not on the fake clock's microtasks). */
    private readonly privateKey: KeyObject,
  ) {
    this.material = material;
  }

  static async create(clock: FakeClock, material: CaKeyMaterial): Promise<SwitchableCa> {
    return new SwitchableCa(clock, material, (await generateKeyPair()).privateKey);
  }

  async fetchCertificate(identity: string): Promise<WorkloadCert> {
    this.calls++;
    const m = this.material;
    const privateKey = this.privateKey;
    const issued = new FastLeafIssuer({ signer: m.leafSigner, now: () => this.clock.now() }).issue({ csr: createCsr({ privateKey, uri: identity }).pem, spiffeId: identity, ttlSeconds: 3600 });
    const leaf = new X509Certificate(issued.pem);
    const chain = [leaf.raw, ...(m.signerIsRoot ? [] : [m.certDer]), ...m.chain.map((c) => Buffer.from(c.rawData))];
    return {
      identity,
      chainDer: chain,
      rootsDer: m.roots.map((r) => Buffer.from(r.rawData)),
      privateKey: exportPkcs8Der(privateKey),
      serial: leaf.serialNumber.toLowerCase(),
      notBefore: Date.parse(leaf.validFrom),
      notAfter: Date.parse(leaf.validTo),
    };
  }
}

/** True when `cert` chains (signatures, node:crypto) to one of `roots`. */
const verifies = (cert: WorkloadCert, roots: readonly Buffer[]): boolean => chainVerifies(cert.chainDer, roots);

const signing = (ca: CaCertificate, roots: readonly CaCertificate[], chain: readonly CaCertificate[] = []): CaKeyMaterial =>
  caKeyMaterial({ cert: ca.cert, keyObject: ca.privateKey, chain: chain.map((c) => c.cert), roots: roots.map((r) => r.cert) });

interface Rig {
  readonly clock: FakeClock;
  readonly ca: SwitchableCa;
  readonly certs: CertManager;
  readonly bundle: TrustBundle;
  readonly identities: readonly string[];
  readonly changes: string[][];
  readonly reissued: string[];
  /** Every held leaf verifies against the bundle served; returns how many are held. */
  check(label: string): number;
  /** One CA fetch (by refreshing identity 0), then settle the queue. */
  settle(): Promise<void>;
}

async function rig(initial: CaKeyMaterial, names = ['a', 'b', 'c']): Promise<Rig> {
  const clock = new FakeClock(Date.now());
  const ca = await SwitchableCa.create(clock, initial);
  const certs = new CertManager({ ca, clock, rng: () => 0.5 });
  const reissued: string[] = [];
  const observer: TrustBundleObserver = { reissueRequested: (identity) => reissued.push(identity) };
  const bundle = new TrustBundle(TD, initial.roots.map((r) => Buffer.from(r.rawData)), { clock, settleMs: SETTLE_MS, observer });
  const changes: string[][] = [];
  bundle.onChange((roots) => changes.push(roots.map((r) => new X509Certificate(r).subject)));
  bundle.follow(certs);
  const identities = names.map(id);
  for (const i of identities) certs.retain(i, `pod-${i}`);
  const settle = async () => {
    for (let i = 0; i < 50 && (certs.inFlight > 0 || certs.queued > 0); i++) await flushMicrotasks();
    await flushMicrotasks();
  };
  await settle();
  const check = (label: string) => {
    let held = 0;
    for (const i of identities) {
      const cert = certs.current(i);
      if (!cert) continue;
      held++;
      assert.ok(verifies(cert, bundle.rootsDer), `${label}: ${i} (serial ${cert.serial}) does not verify against the bundle served`);
      assert.ok(bundle.servable(cert), `${label}: servable(${i})`);
    }
    return held;
  };
  return { clock, ca, certs, bundle, identities, changes, reissued, check, settle };
}

describe('TrustBundle during rotations', () => {
  it('old root -> both -> new root: adds at once, drops only after every leaf is re-issued and the settle window passed', async () => {
    const now = Date.now();
    const oldRoot = await createRootCa({ subject: 'O=cluster.local, CN=old root', ttlSeconds: 86400, nowMs: now });
    const newRoot = await createRootCa({ subject: 'O=cluster.local, CN=new root', ttlSeconds: 86400, nowMs: now });
    const oldInt = await createIntermediateCa({ subject: 'O=cluster.local, CN=old int', ttlSeconds: 86400, issuer: oldRoot, nowMs: now });
    const newInt = await createIntermediateCa({ subject: 'O=cluster.local, CN=new int', ttlSeconds: 86400, issuer: newRoot, nowMs: now });
    const r = await rig(signing(oldInt, [oldRoot]));
    assert.equal(r.check('start'), 3);

    // Step 1: the CA trusts both, still signs under the old root. One answer is enough.
    r.ca.material = signing(oldInt, [oldRoot, newRoot]);
    r.certs.refreshNow(r.identities[0]!);
    await r.settle();
    assert.equal(r.bundle.rootsDer.length, 2, 'the added root is served at once');
    assert.equal(r.changes.at(-1)?.length, 2);
    r.check('both roots');

    // Step 2: it signs under the new root. Leaves under the old one keep verifying.
    r.ca.material = signing(newInt, [oldRoot, newRoot]);
    r.certs.refreshNow(r.identities[1]!);
    await r.settle();
    assert.equal(r.bundle.rootsDer.length, 2);
    r.check('new intermediate');

    // Step 3: the old root is dropped. The answer that says so (identity 2's) makes the bundle
    // re-issue identity 0 (still under the old root), and keep the old root until then.
    r.ca.material = signing(newInt, [newRoot]);
    const callsBefore = r.ca.calls;
    const versionBefore = r.bundle.version;
    r.certs.refreshNow(r.identities[2]!);
    await r.settle();
    r.check('after the drop was asked');
    assert.deepEqual(r.reissued, [r.identities[0]], 'only the leaf still under the old root is re-issued');
    assert.equal(r.ca.calls, callsBefore + 2, 'identity 2 (the drop) and identity 0 (its re-issue)');
    assert.equal(r.bundle.rootsDer.length, 2, 'the old root stays for the settle window after the last re-issue');
    assert.equal(r.bundle.retainedRoots, 1);
    assert.equal(r.bundle.version, versionBefore);
    await r.clock.advance(SETTLE_MS - 1);
    assert.equal(r.bundle.rootsDer.length, 2, 'not before the window has passed');
    await r.clock.advance(1);
    await flushMicrotasks();
    assert.equal(r.bundle.rootsDer.length, 1, 'dropped once the window passed');
    assert.equal(new X509Certificate(r.bundle.rootsDer[0]!).subject.includes('new root'), true);
    assert.equal(r.bundle.retainedRoots, 0);
    assert.equal(r.check('new root only'), 3);
    r.certs.stop();
  });

  it('a CA that jumps from one root to another with no overlap: both served until every leaf moved', async () => {
    const now = Date.now();
    const oldRoot = await createRootCa({ subject: 'O=cluster.local, CN=old root', ttlSeconds: 86400, nowMs: now });
    const newRoot = await createRootCa({ subject: 'O=cluster.local, CN=new root', ttlSeconds: 86400, nowMs: now });
    const r = await rig(signing(oldRoot, [oldRoot]), ['a', 'b', 'c', 'd']);
    r.ca.material = signing(newRoot, [newRoot]);
    r.certs.refreshNow(r.identities[0]!);
    await r.settle();
    // The first new-root leaf came with [new] only: the bundle serves both and re-issues the rest.
    r.check('after the jump');
    assert.deepEqual(new Set(r.reissued), new Set(r.identities.slice(1)));
    assert.equal(r.bundle.rootsDer.length, 2);
    await r.clock.advance(SETTLE_MS);
    await flushMicrotasks();
    assert.equal(r.bundle.rootsDer.length, 1);
    assert.equal(r.check('new root only'), 4);
    // Changes seen: [old,new] then [new]; never a bundle without the root of a held leaf.
    assert.deepEqual(r.changes.map((c) => c.length), [2, 1]);
    r.certs.stop();
  });

  it('an intermediate-only rotation changes nothing in the bundle; every leaf verifies throughout', async () => {
    const now = Date.now();
    const root = await createRootCa({ subject: 'O=cluster.local, CN=root', ttlSeconds: 86400, nowMs: now });
    const int1 = await createIntermediateCa({ subject: 'O=cluster.local, CN=int 1', ttlSeconds: 86400, issuer: root, nowMs: now });
    const int2 = await createIntermediateCa({ subject: 'O=cluster.local, CN=int 2', ttlSeconds: 86400, issuer: root, nowMs: now });
    const r = await rig(signing(int1, [root]));
    r.ca.material = signing(int2, [root]);
    for (const i of r.identities) {
      r.certs.refreshNow(i);
      await r.settle();
      r.check(`after ${i}`);
    }
    assert.equal(r.bundle.version, 0);
    assert.deepEqual(r.reissued, []);
    r.certs.stop();
  });

  it('a forgotten identity no longer holds a dropped root back; an unknown leaf is not servable', async () => {
    const now = Date.now();
    const oldRoot = await createRootCa({ subject: 'O=cluster.local, CN=old root', ttlSeconds: 86400, nowMs: now });
    const newRoot = await createRootCa({ subject: 'O=cluster.local, CN=new root', ttlSeconds: 86400, nowMs: now });
    const foreign = await createRootCa({ subject: 'O=elsewhere', ttlSeconds: 86400, nowMs: now });
    const clock = new FakeClock(now);
    const ca = await SwitchableCa.create(clock, signing(oldRoot, [oldRoot]));
    const certs = new CertManager({ ca, clock, rng: () => 0.5, forgetGraceMs: 10 });
    // No refreshNow on this source: the bundle can ask, nothing re-issues.
    const source = { subscribeAll: certs.subscribeAll.bind(certs) };
    const withheld: string[] = [];
    const bundle = new TrustBundle(TD, [Buffer.from(oldRoot.der)], { clock, settleMs: 0, observer: { withheld: (i) => withheld.push(i) } });
    bundle.follow(source);
    certs.retain(id('a'), 'pod-a');
    await flushMicrotasks();
    const held = certs.current(id('a'))!;
    bundle.update([Buffer.from(newRoot.der)]);
    assert.equal(bundle.rootsDer.length, 2, 'kept: a held leaf still chains to the old root');
    certs.release(id('a'), 'pod-a');
    await clock.advance(10);
    await flushMicrotasks();
    assert.equal(bundle.rootsDer.length, 1, 'the identity is forgotten: nothing holds the old root');
    assert.equal(bundle.servable(held), false);
    assert.deepEqual(withheld, [id('a')]);
    ca.material = signing(foreign, [foreign]);
    const stranger = await ca.fetchCertificate(id('x'));
    assert.equal(bundle.servable(stranger), false);
    certs.stop();
  });
});
