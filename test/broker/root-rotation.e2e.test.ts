/**
 * Root and intermediate rotations end to end, under a live Broker API consumer: the real broker
 * (its time on a SkipClock, so refreshes are reached without waiting), the real CA over TLS, the
 * devcluster. The consumer (ztunnel's SVID over the broker socket, mTLS) holds one
 * SubscribeToX509SVID stream per pod of the node; after every message on any stream the test
 * records each stream's (bundle, leaf chain) and checks that every stream's bundle verifies its
 * own leaf and every peer's current leaf (node:crypto, test/support/chain-verify.ts), counting
 * the moments where one does not — zero is the assertion — and openssl verifies the consumer's
 * state after each step. Where cgroup v2 and Python grpcio are there (root), the broker also serves
 * its Workload API socket and each pod has two Workload API consumers besides: a Python grpcio
 * FetchX509SVID stream and a FetchX509Bundles stream, each process placed in the pod's
 * kubelet-style container cgroup before it connects; their messages go through the same check (a
 * FetchX509Bundles consumer holds a bundle only: it must verify every leaf).
 *
 * - self-signed: `certbroker ca rotate-root prepare | activate | finish` (the CLI as a process,
 *   against the CA's Secret), each picked up by the CA's poll of the Secret, no restart;
 * - cacerts: an intermediate-only rotation, then the operator's root rotation (write both roots,
 *   switch the signing intermediate, drop the old root), each picked up by the CA's poll.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { BrokerClient, splitDerCertificates, startBroker, type Broker } from '../../src/broker/index.js';
import type { SubscribeToX509SVIDResponse } from '../../src/protocol/spiffe-broker.js';
import { certificateToPem, createIntermediateCa, type CaCertificate } from '../../src/pki/index.js';
import { chainVerifies } from '../support/chain-verify.js';
import { REPO_ROOT } from '../support/fixtures.js';
import { SkipClock } from '../support/skip-clock.js';
import { opensslMissing, pythonGrpcMissing } from '../support/tools.js';
import { KubeletCgroups, kubeCgroupsProblem } from '../../src/cli/kube-cgroups.js';
import { cacertsFiles, makePluginCa, opensslVerifyChain, writeCacertsAtomic, type PluginCa } from '../ca/support/pki-fixtures.js';
import { eventually } from './support/eventually.js';
import { containerCgroup, generatePythonStubs, PythonWorkloads, type Workload } from './support/python-workload.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD, type CaOptions } from './support/stack.js';

const run = promisify(execFile);
const PODS = ['web', 'cart', 'db'] as const;
/** The CA re-reads its signing material this often (real time). */
const CA_POLL_MS = 100;
/** Workload API consumers run where pod cgroups can be made (root, cgroup v2) and Python grpcio is installed. */
const cgroups = KubeletCgroups.v2();
const workloadApiSkip = kubeCgroupsProblem(cgroups, 'cgroup v2') ?? pythonGrpcMissing();

interface Held {
  readonly bundle: Buffer[];
  /** Absent for a FetchX509Bundles consumer (a bundle, no leaf). */
  readonly chain: Buffer[] | undefined;
}

/** The consumers' streams and the invariant checked after every message. */
class RotationWatch {
  /** By consumer: `broker:<pod>`, `wl-svid:<pod>`, `wl-bundles:<pod>`. */
  readonly latest = new Map<string, Held>();
  readonly violations: string[] = [];
  /** Consumers expected before a state counts as settled. */
  expected: number = PODS.length;
  messages = 0;
  workloadApiMessages = 0;
  checks = 0;

  record(consumer: string, bundle: Buffer[], chain: Buffer[] | undefined): void {
    this.latest.set(consumer, { bundle, chain });
    this.messages++;
    if (!consumer.startsWith('broker:')) this.workloadApiMessages++;
    for (const [holder, held] of this.latest) {
      for (const [peer, other] of this.latest) {
        if (!other.chain) continue;
        this.checks++;
        if (!chainVerifies(other.chain, held.bundle)) {
          this.violations.push(`after message ${this.messages} (${consumer}): ${holder}'s bundle (${held.bundle.map(subject).join(' + ')}) does not verify ${peer}'s leaf (issuer ${issuer(other.chain)})`);
        }
      }
    }
  }

  /** Every consumer's bundle has `roots` roots and every leaf was issued by a CA named `issuerCn`. */
  settledOn(roots: number, issuerCn: string): boolean {
    if (this.latest.size < this.expected) return false;
    return [...this.latest.values()].every((h) => h.bundle.length === roots && (!h.chain || issuer(h.chain).includes(issuerCn)));
  }

  /** Reads a Python Workload API consumer's lines as they come; a refusal or an end is a violation. */
  follow(consumer: string, w: Workload): void {
    void (async () => {
      for (let n = 0; ; n++) {
        let line;
        try {
          line = await w.line(n);
        } catch {
          return; // killed at the end of the test
        }
        if (line.code !== undefined || line.ended) {
          this.violations.push(`${consumer}: stream ended (${line.code ?? 'ended'} ${line.details ?? ''})`);
          return;
        }
        if (line.bundles) {
          this.record(consumer, splitDerCertificates(Buffer.from(line.bundles[`spiffe://${TD}`] ?? '', 'base64')), undefined);
        } else {
          const svid = line.svids[0]!;
          this.record(consumer, splitDerCertificates(Buffer.from(svid.bundle, 'base64')), splitDerCertificates(Buffer.from(svid.x509_svid, 'base64')));
        }
      }
    })();
  }
}

const subject = (der: Buffer) => new X509Certificate(der).subject.replace(/\n/g, ', ');
const issuer = (chain: readonly Buffer[]) => new X509Certificate(chain[0]!).issuer.replace(/\n/g, ', ');

interface Rig {
  readonly stack: Stack;
  readonly clock: SkipClock;
  readonly broker: Broker;
  readonly client: BrokerClient;
  readonly watch: RotationWatch;
  /** A new pod on the node (one more CA fetch, as pod churn brings). */
  addPod(name: string): Promise<void>;
  /** openssl verifies the web stream's leaf with its own bundle, then each peer's leaf with it. */
  opensslCheck(): Promise<void>;
  metric(name: string): Promise<number>;
  close(): Promise<void>;
}

async function rig(prefix: string, ca: CaOptions, t: { diagnostic(m: string): void }): Promise<Rig> {
  const stack = await Stack.start({ tmpPrefix: prefix, namespaces: ['shop'], serviceAccounts: [...PODS, 'late', 'later', 'last'].map((p) => `shop/${p}`), ca });
  const clock = new SkipClock();
  const workloadApiSocketPath = workloadApiSkip ? undefined : join(stack.dir, 'workload-api', 'socket');
  const broker = await startBroker({ ...stack.brokerConfig({ clock }), ...(workloadApiSocketPath ? { workloadApiSocketPath } : {}) });
  await broker.whenReady(AbortSignal.timeout(20_000));
  const consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
  const client = new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: stack.ca.rootsPem(), certChainPem: consumer.certChainPem, privateKeyPem: consumer.privateKeyPem, trustDomain: TD });
  const watch = new RotationWatch();
  const uids = new Map<string, string>();
  for (const pod of PODS) {
    const uid = await stack.createPod({ namespace: 'shop', name: `${pod}-1`, serviceAccount: pod, nodeName: NODE });
    uids.set(pod, uid);
    const stream = client.subscribeX509Svid({ uid });
    stream.on('data', (m: SubscribeToX509SVIDResponse) => {
      const svid = m.svids[0]!;
      watch.record(`broker:${pod}`, splitDerCertificates(svid.bundle), splitDerCertificates(svid.x509_svid));
    });
    stream.on('error', (err) => watch.violations.push(`broker:${pod}: stream error ${err.message}`));
  }
  await eventually('a first message on every stream', () => watch.latest.size === PODS.length);
  let workloads: PythonWorkloads | undefined;
  if (workloadApiSocketPath) {
    const stubs = join(stack.dir, 'py');
    await generatePythonStubs(stubs);
    workloads = new PythonWorkloads(cgroups!, stubs, `unix://${workloadApiSocketPath}`);
    for (const pod of PODS) {
      await eventually(`${pod} tracked`, () => broker.pods.byUid(uids.get(pod)!));
      watch.follow(`wl-svid:${pod}`, workloads.start('x509svid', { cgroup: containerCgroup(uids.get(pod)!), count: 1_000_000 }));
      watch.follow(`wl-bundles:${pod}`, workloads.start('x509bundles', { cgroup: containerCgroup(uids.get(pod)!), count: 1_000_000 }));
    }
    watch.expected = PODS.length * 3;
    await eventually('a first message on every Workload API stream', () => watch.latest.size === watch.expected);
  } else {
    t.diagnostic(`Workload API consumers not run: ${workloadApiSkip}`);
  }
  const opsPort = broker.opsPort!;
  return {
    stack,
    clock,
    broker,
    client,
    watch,
    addPod: async (name) => {
      await stack.createPod({ namespace: 'shop', name: `${name}-1`, serviceAccount: name, nodeName: NODE });
      await eventually(`${name} identity ready`, () => broker.certs.current(`spiffe://${TD}/ns/shop/sa/${name}`));
    },
    opensslCheck: async () => {
      const own = watch.latest.get('broker:web')!;
      const bundlePem = own.bundle.map((d) => certificateToPem(d)).join('');
      for (const held of watch.latest.values()) if (held.chain) await opensslVerifyChain([...held.chain.map((d) => certificateToPem(d)), bundlePem]);
    },
    metric: async (name) => {
      const text = await (await fetch(`http://127.0.0.1:${opsPort}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      assert.ok(line, `metric ${name} exported`);
      return Number(line.split(' ')[1]);
    },
    close: async () => {
      client.close();
      await workloads?.killAll();
      cgroups?.cleanup();
      await broker.stop(500);
      await stack.close();
    },
  };
}

/**
 * Every identity the broker holds comes due for its refresh now (the certificate manager's own
 * refresh path, as the half-life timer runs it: the CA's real-time leaves forbid skipping the
 * broker's clock by more than their lifetime), then the streams settle on leaves issued by
 * `issuerCn` with `roots` roots in each bundle.
 */
async function refreshAll(r: Rig, issuerCn: string, roots: number): Promise<void> {
  for (const identity of r.broker.certs.identities()) r.broker.certs.refreshNow(identity);
  await eventually(`every stream on leaves from ${issuerCn} with ${roots} root(s)`, () => r.watch.settledOn(roots, issuerCn));
}

/** Waits until a leaf straight from the CA verifies against `rootsDer` and its issuer names `issuerCn`: the CA installed the new material. */
async function caSignsUnder(r: Rig, what: string, check: (chain: Buffer[]) => boolean): Promise<void> {
  await eventually(what, async () => {
    const svid = await r.stack.ownSvid('shop', 'web');
    return check(splitPemChain(svid.certChainPem));
  });
}

function splitPemChain(pem: string): Buffer[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? []).map((b) => new X509Certificate(b).raw);
}

const rootCount = (r: Rig) => r.stack.ca.rootsPem().match(/BEGIN CERTIFICATE/g)?.length ?? 0;

describe('root rotation under a live Broker API consumer', { skip: opensslMissing() }, () => {
  it('self-signed: rotate-root prepare -> activate -> finish, each picked up without a restart; no moment where a bundle fails a leaf', async (t) => {
    const r = await rig('rotation-ss-', {
      signer: { kind: 'self-signed', namespace: BROKER_NS, secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 10 * 365 * 86400, pollIntervalMs: CA_POLL_MS },
    }, t);
    try {
      const kubeconfig = join(r.stack.dir, 'admin.kubeconfig');
      await r.stack.dc.writeKubeconfig(kubeconfig, { token: r.stack.dc.adminToken, name: 'admin' });
      const rotate = async (step: string): Promise<{ phase: string; trusted: unknown[] }> => {
        const { stdout } = await run(process.execPath, [join(REPO_ROOT, 'dist/src/cli/main.js'), 'ca', 'rotate-root', step, '--kubeconfig', kubeconfig, '--namespace', BROKER_NS], {
          env: { PATH: process.env.PATH ?? '' },
        });
        return JSON.parse(stdout) as { phase: string; trusted: unknown[] };
      };
      const oldRootDer = splitPemChain(r.stack.ca.rootsPem())[0]!;
      assert.equal(r.watch.settledOn(1, 'O=cluster.local'), true);

      // 1. prepare: both roots trusted, the old one signs. The CA's answers carry both in the last element.
      assert.equal((await rotate('prepare')).phase, 'prepared');
      await eventually('the CA trusts both roots', () => rootCount(r) === 2);
      const newRootDer = splitPemChain(r.stack.ca.rootsPem()).find((d) => !d.equals(oldRootDer))!;
      await r.addPod('late'); // the next fetch brings the roots to the broker
      await eventually('both roots on every stream', () => [...r.watch.latest.values()].every((h) => h.bundle.length === 2));
      assert.equal(await r.metric('certbroker_broker_trust_bundle_roots'), 2);
      assert.match(await r.stack.ca.metrics.registry.metrics(), /^certbroker_ca_trusted_roots 2$/m);
      await r.opensslCheck();

      // 2. activate: the new root signs (both still trusted). One new pod's leaf is under it; the
      // others stay under the old root until their refresh.
      assert.equal((await rotate('activate')).phase, 'overlap');
      await caSignsUnder(r, 'the CA signs with the new root', (chain) => chainVerifies(chain, [newRootDer]));
      await r.addPod('later');
      assert.ok(chainVerifies(r.broker.certs.current(`spiffe://${TD}/ns/shop/sa/later`)!.chainDer, [newRootDer]));
      assert.ok([...r.watch.latest.values()].every((h) => !h.chain || chainVerifies(h.chain, [oldRootDer])), 'the streams still hold old-root leaves');

      // 3. finish: the CA drops the old root. The first answer that says so (one more pod) makes
      // the broker re-issue every leaf still under the old root, then drop it from the bundle.
      const reissuesBefore = await r.metric('certbroker_broker_rotation_reissues_total');
      assert.equal((await rotate('finish')).phase, 'single');
      await eventually('the CA trusts the new root alone', () => rootCount(r) === 1);
      await r.addPod('last');
      await eventually('every stream on the new root alone', () =>
        [...r.watch.latest.values()].every((h) => h.bundle.length === 1 && h.bundle[0]!.equals(newRootDer) && (!h.chain || chainVerifies(h.chain, [newRootDer]))),
      );
      assert.ok((await r.metric('certbroker_broker_rotation_reissues_total')) - reissuesBefore >= PODS.length, 're-issued ahead of their refresh');
      assert.equal(await r.metric('certbroker_broker_trust_bundle_retained_roots'), 0);
      assert.equal(await r.metric('certbroker_broker_svid_withheld_total'), 0);
      assert.match(await r.stack.ca.metrics.registry.metrics(), /^certbroker_ca_trusted_roots 1$/m);
      await r.opensslCheck();

      t.diagnostic(`messages ${r.watch.messages} (Workload API ${r.watch.workloadApiMessages}), bundle x leaf checks ${r.watch.checks}, violations ${r.watch.violations.length}`);
      assert.deepEqual(r.watch.violations, [], 'no moment where a bundle fails to verify a leaf');
      assert.ok(r.watch.messages >= PODS.length * 3, `messages recorded: ${r.watch.messages}`);
      if (!workloadApiSkip) assert.ok(r.watch.workloadApiMessages >= PODS.length * 2 * 3, `Workload API messages recorded: ${r.watch.workloadApiMessages}`);
    } finally {
      await r.close();
    }
  });

  it('cacerts: an intermediate-only rotation, then write both roots -> switch the intermediate -> drop the old root, each picked up by the poll', async (t) => {
    const scratch = await import('../support/scratch.js');
    const dir = scratch.tempDirSync('rotation-cacerts-');
    try {
      const old: PluginCa = await makePluginCa('Old');
      const fresh: PluginCa = await makePluginCa('New');
      const secondInt: CaCertificate = await createIntermediateCa({
        subject: 'CN=Old Intermediate 2, O=certbroker-test',
        ttlSeconds: 365 * 86400,
        issuer: { cert: old.root.cert, privateKey: old.root.privateKey },
      });
      await mkdir(dir, { recursive: true });
      await writeCacertsAtomic(dir, cacertsFiles(old));
      const r = await rig('rotation-cacerts-', { signer: { kind: 'cacerts', dir, pollIntervalMs: CA_POLL_MS } }, t);
      try {
        assert.ok(r.watch.settledOn(1, 'CN=Old Intermediate'));
        // Intermediate only: the same root, a new signing intermediate. Nothing changes in the bundle.
        await writeCacertsAtomic(dir, cacertsFiles({ root: old.root, intermediate: secondInt }));
        await caSignsUnder(r, 'the CA signs with the second intermediate', (chain) => issuer(chain).includes('CN=Old Intermediate 2'));
        await refreshAll(r, 'CN=Old Intermediate 2', 1);
        assert.equal(r.broker.bundle.version, 0, 'an intermediate rotation does not touch the bundle');
        await r.opensslCheck();

        // Root rotation, step 1: root-cert.pem holds both roots; the second intermediate still signs.
        await writeCacertsAtomic(dir, cacertsFiles({ root: old.root, intermediate: secondInt }, [fresh.root]));
        await eventually('the CA trusts both roots', () => rootCount(r) === 2);
        await refreshAll(r, 'CN=Old Intermediate 2', 2);
        await r.opensslCheck();
        // Step 2: the new intermediate (under the new root) signs; both roots stay. The CA's own
        // serving certificate moves to the new root too: the broker reaches it with the root it
        // learnt from the answers (its configured root file still holds the old root alone).
        await writeCacertsAtomic(dir, cacertsFiles(fresh, [old.root]));
        await caSignsUnder(r, 'the CA signs under the new root', (chain) => issuer(chain).includes('CN=New Intermediate'));
        await refreshAll(r, 'CN=New Intermediate', 2);
        await r.opensslCheck();
        // Step 3: the old root is dropped.
        await writeCacertsAtomic(dir, cacertsFiles(fresh));
        await eventually('the CA trusts the new root alone', () => rootCount(r) === 1);
        await refreshAll(r, 'CN=New Intermediate', 1);
        await r.opensslCheck();
        assert.equal(await r.metric('certbroker_broker_trust_bundle_roots'), 1);
        assert.equal(await r.metric('certbroker_broker_svid_withheld_total'), 0);
        t.diagnostic(`messages ${r.watch.messages} (Workload API ${r.watch.workloadApiMessages}), bundle x leaf checks ${r.watch.checks}, violations ${r.watch.violations.length}`);
        assert.deepEqual(r.watch.violations, [], 'no moment where a bundle fails to verify a leaf');
      } finally {
        await r.close();
      }
    } finally {
      await scratch.removeTempDir(dir);
    }
  });
});
