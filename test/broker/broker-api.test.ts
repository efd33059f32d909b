/**
 * The Broker API service's stream logic on a fake clock: first message at once, updates paced
 * by the rng within `updateJitterMs`, one pending update per stream (coalesced), a stream that
 * ends when its pod goes. The gRPC call is an in-memory stand-in for grpc-js's server call
 * object (the transport itself is covered over a real socket in broker-e2e.test.ts); the caller
 * certificate is a real X509-SVID.
 */
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { before, describe, it } from 'node:test';
import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';
import { FakeClock, flushMicrotasks } from '../support/fake-clock.js';
import { silentLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { BrokerApiService, type CaClient, CertManager, encodePodReference, NodePods, splitDerCertificates, TrustBundle, type WorkloadCert } from '../../src/broker/index.js';
import { chainVerifies } from '../support/chain-verify.js';
import { decodeRpcStatus } from '../../src/grpc/rpc-status.js';
import { caKeyMaterial, createCsr, createRootCa, FastLeafIssuer, generateKeyPair } from '../../src/pki/index.js';

const ZTUNNEL = 'spiffe://cluster.local/ns/istio-system/sa/ztunnel';
const HOUR = 3_600_000;

/** What the service uses of a grpc-js server writable stream. */
class FakeCall extends EventEmitter {
  readonly written: unknown[] = [];
  ended = false;
  error: { code?: number; details?: string } | undefined;
  readonly metadata = new Metadata();
  constructor(
    readonly request: unknown,
    private readonly peerDer: Buffer | undefined,
  ) {
    super();
    this.on('error', (e: { code?: number; details?: string }) => (this.error = e));
  }
  write(m: unknown): boolean {
    this.written.push(m);
    return true;
  }
  end(): void {
    this.ended = true;
  }
  getAuthContext() {
    return this.peerDer ? { sslPeerCertificate: { raw: this.peerDer } } : {};
  }
  getPeer(): string {
    return 'unix:fake';
  }
}

describe('BrokerApiService streams (fake clock)', () => {
  let ztunnelDer: Buffer;
  let webDer: Buffer;
  /** The roots (DER): the one that signs, two more for bundle changes. */
  let rootDer: Buffer;
  let otherRoots: Buffer[];
  /** A real leaf for `id` under `rootDer` (the front sends only leaves its bundle verifies). */
  let workloadLeaf: (id: string) => Buffer;

  before(async () => {
    const root = await createRootCa({ subject: 'CN=test root', ttlSeconds: 86400 });
    rootDer = root.der;
    otherRoots = [(await createRootCa({ subject: 'CN=root 2', ttlSeconds: 86400 })).der, (await createRootCa({ subject: 'CN=root 3', ttlSeconds: 86400 })).der];
    const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
    const leaf = async (id: string) => {
      const { privateKey } = await generateKeyPair();
      return Buffer.from(issuer.issue({ csr: createCsr({ privateKey, uri: id }).der, spiffeId: id, ttlSeconds: 3600 }).der);
    };
    const workloadKey = (await generateKeyPair()).privateKey;
    workloadLeaf = (id) => Buffer.from(issuer.issue({ csr: createCsr({ privateKey: workloadKey, uri: id }).der, spiffeId: id, ttlSeconds: 3600 }).der);
    ztunnelDer = await leaf(ZTUNNEL);
    webDer = await leaf('spiffe://cluster.local/ns/shop/sa/web');
  });

  function setup(bundleRoots?: readonly Buffer[]) {
    const clock = new FakeClock();
    let serial = 0;
    const ca: CaClient = {
      fetchCertificate: async (identity): Promise<WorkloadCert> => ({
        identity,
        chainDer: [workloadLeaf(identity)],
        rootsDer: [rootDer],
        privateKey: new Secret(Buffer.from('key')),
        serial: String(++serial),
        notBefore: clock.now(),
        notAfter: clock.now() + HOUR,
      }),
    };
    const certs = new CertManager({ ca, clock, rng: () => 0.5 });
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => clock.now() });
    const bundle = new TrustBundle('cluster.local', bundleRoots ?? [rootDer]);
    const service = new BrokerApiService({
      pods, certs, bundle, allowedCallers: [ZTUNNEL], clock, rng: () => 0.25, logger: silentLogger, updateJitterMs: 1000,
    });
    const impl = service.implementation() as unknown as Record<string, (call: FakeCall) => void>;
    const open = (uid: string, options: { peer?: Buffer | null; header?: boolean; rpc?: string } = {}) => {
      const call = new FakeCall({ reference: { reference: encodePodReference({ uid }) } }, options.peer === null ? undefined : (options.peer ?? ztunnelDer));
      if (options.header !== false) call.metadata.set('broker.spiffe.io', 'true');
      impl[options.rpc ?? 'SubscribeToX509SVID']!(call);
      return call;
    };
    const addPod = (uid: string, sa: string) =>
      pods.upsert({ uid, namespace: 'shop', name: `${sa}-${uid.slice(-1)}`, serviceAccount: sa, nodeName: 'node-1', hostNetwork: false, deleting: false, phase: 'Running' });
    return { clock, certs, pods, bundle, service, open, addPod };
  }

  const uid = (n: number) => `00000000-0000-4000-8000-00000000000${n}`;

  it('sends the first message at once and paces updates by the rng, coalescing changes', async () => {
    const { clock, bundle, open, addPod, certs } = setup();
    addPod(uid(1), 'web');
    addPod(uid(2), 'web');
    addPod(uid(3), 'cart');
    await flushMicrotasks();
    const calls = [open(uid(1)), open(uid(2)), open(uid(3)), open(uid(1), { rpc: 'SubscribeToX509Bundles' })];
    await flushMicrotasks();
    assert.deepEqual(calls.map((c) => c.written.length), [1, 1, 1, 1], 'first message at once');
    assert.equal(certs.caCalls, 2, 'two pods of one SA share one certificate');

    bundle.update([rootDer, otherRoots[0]!]);
    bundle.update([rootDer, ...otherRoots]); // a second change before the first update went out
    await flushMicrotasks();
    assert.deepEqual(calls.map((c) => c.written.length), [1, 1, 1, 1], 'nothing before the paced delay');
    await clock.advance(249); // rng 0.25 x 1000 ms
    assert.deepEqual(calls.map((c) => c.written.length), [1, 1, 1, 1]);
    await clock.advance(1);
    assert.deepEqual(calls.map((c) => c.written.length), [2, 2, 2, 2], 'one update per stream, with the latest state');
    const last = calls[0]!.written.at(-1) as { svids: Array<{ bundle: Buffer; spiffe_id: string }> };
    assert.deepEqual(last.svids[0]!.bundle, Buffer.concat([rootDer, ...otherRoots]));
    assert.equal(last.svids[0]!.spiffe_id, 'spiffe://cluster.local/ns/shop/sa/web');
  });

  it('never sends a leaf the bundle sent with it does not verify: withheld until a bundle that does', async () => {
    const { clock, bundle, open, addPod } = setup([otherRoots[0]!]);
    addPod(uid(1), 'web');
    await flushMicrotasks();
    const call = open(uid(1));
    await flushMicrotasks();
    await clock.advance(1000);
    assert.equal(call.written.length, 0, 'the leaf chains to a root the bundle lacks: nothing sent');
    bundle.update([otherRoots[0]!, rootDer]);
    await clock.advance(1000);
    assert.equal(call.written.length, 1, 'sent once the bundle verifies it');
    const msg = call.written[0] as { svids: Array<{ bundle: Buffer }> };
    assert.deepEqual(msg.svids[0]!.bundle, Buffer.concat([otherRoots[0]!, rootDer]));
  });

  it('a CA that adds a root and signs under it at once: no stream is sent a leaf under it before every stream was sent the root', async () => {
    const oldRoot = await createRootCa({ subject: 'CN=old root', ttlSeconds: 86400 });
    const newRoot = await createRootCa({ subject: 'CN=new root', ttlSeconds: 86400 });
    const key = (await generateKeyPair()).privateKey;
    let signing = { root: oldRoot, roots: [oldRoot.der] };
    const clock = new FakeClock(Date.now());
    const ca: CaClient = {
      fetchCertificate: async (identity): Promise<WorkloadCert> => {
        const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: signing.root.cert, keyObject: signing.root.privateKey }).leafSigner });
        const leaf = Buffer.from(issuer.issue({ csr: createCsr({ privateKey: key, uri: identity }).der, spiffeId: identity, ttlSeconds: 3600 }).der);
        return { identity, chainDer: [leaf], rootsDer: signing.roots, privateKey: new Secret(Buffer.from('key')), serial: leaf.subarray(-8).toString('hex'), notBefore: clock.now(), notAfter: clock.now() + HOUR };
      },
    };
    const certs = new CertManager({ ca, clock, rng: () => 0.5 });
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: () => clock.now() });
    const bundle = new TrustBundle('cluster.local', [oldRoot.der], { clock, settleMs: 1000 });
    bundle.follow(certs);
    // The paced delays: the stream whose leaf moves goes first (0.1), its peer last (0.9).
    const draws = [0.1, 0.9];
    const service = new BrokerApiService({ pods, certs, bundle, allowedCallers: [ZTUNNEL], clock, rng: () => draws.shift() ?? 0.5, logger: silentLogger, updateJitterMs: 1000 });
    const impl = service.implementation() as unknown as Record<string, (call: FakeCall) => void>;
    const streams = new Map<string, { bundle: Buffer[]; chain: Buffer[] }>();
    const violations: string[] = [];
    const open = (uid: string, name: string) => {
      const call = new FakeCall({ reference: { reference: encodePodReference({ uid }) } }, ztunnelDer);
      call.metadata.set('broker.spiffe.io', 'true');
      const write = call.write.bind(call);
      call.write = (m: unknown) => {
        const svid = (m as { svids: Array<{ x509_svid: Buffer; bundle: Buffer }> }).svids[0]!;
        streams.set(name, { bundle: splitDerCertificates(svid.bundle), chain: splitDerCertificates(svid.x509_svid) });
        for (const [holder, held] of streams) for (const [peer, other] of streams) if (!chainVerifies(other.chain, held.bundle)) violations.push(`${holder} cannot verify ${peer} at ${clock.now()}`);
        return write(m);
      };
      impl['SubscribeToX509SVID']!(call);
    };
    pods.upsert({ uid: uid(1), namespace: 'shop', name: 'web-1', serviceAccount: 'web', nodeName: 'node-1', hostNetwork: false, deleting: false, phase: 'Running' });
    pods.upsert({ uid: uid(2), namespace: 'shop', name: 'cart-2', serviceAccount: 'cart', nodeName: 'node-1', hostNetwork: false, deleting: false, phase: 'Running' });
    await flushMicrotasks();
    open(uid(1), 'web');
    open(uid(2), 'cart');
    await flushMicrotasks();
    assert.equal(streams.size, 2);

    signing = { root: newRoot, roots: [oldRoot.der, newRoot.der] };
    certs.refreshNow('spiffe://cluster.local/ns/shop/sa/web');
    await flushMicrotasks();
    for (let t = 0; t < 3000; t += 50) await clock.advance(50);
    assert.deepEqual(violations, []);
    const web = streams.get('web')!;
    assert.ok(chainVerifies(web.chain, [newRoot.der]), 'the web stream got its new-root leaf in the end');
    assert.equal(streams.get('cart')!.bundle.length, 2);
    certs.stop();
  });

  it('ends the stream with NOT_FOUND when the pod is deleted', async () => {
    const { pods, open, addPod } = setup();
    addPod(uid(1), 'web');
    const call = open(uid(1));
    await flushMicrotasks();
    pods.remove(uid(1));
    assert.equal(call.error?.code, GrpcStatus.NOT_FOUND);
  });

  it('ends the stream with PERMISSION_DENIED (WORKLOAD_NOT_ENTITLED) when the pod starts terminating or finishes; a new call gets the same', async () => {
    const { pods, open, addPod } = setup();
    addPod(uid(1), 'web');
    addPod(uid(2), 'cart');
    const terminating = open(uid(1));
    const finishing = open(uid(2));
    await flushMicrotasks();
    pods.upsert({ uid: uid(1), namespace: 'shop', name: 'web-1', serviceAccount: 'web', nodeName: 'node-1', hostNetwork: false, deleting: true, phase: 'Running' });
    pods.upsert({ uid: uid(2), namespace: 'shop', name: 'cart-2', serviceAccount: 'cart', nodeName: 'node-1', hostNetwork: false, deleting: false, phase: 'Succeeded' });
    for (const call of [terminating, finishing, open(uid(1)), open(uid(2))]) {
      assert.equal(call.error?.code, GrpcStatus.PERMISSION_DENIED);
      const bin = (call.error as { metadata?: Metadata }).metadata?.get('grpc-status-details-bin')[0] as Buffer;
      assert.equal(decodeRpcStatus(bin).errorInfo?.reason, 'WORKLOAD_NOT_ENTITLED');
    }
  });

  it('refuses callers off the allow-list, missing headers and unknown pods, with the spec codes', async () => {
    const { open, addPod } = setup();
    addPod(uid(1), 'web');
    assert.equal(open(uid(1), { peer: webDer }).error?.code, GrpcStatus.PERMISSION_DENIED);
    assert.equal(open(uid(1), { peer: null }).error?.code, GrpcStatus.UNAUTHENTICATED);
    assert.equal(open(uid(1), { header: false }).error?.code, GrpcStatus.INVALID_ARGUMENT);
    assert.equal(open(uid(9)).error?.code, GrpcStatus.NOT_FOUND);
    assert.equal(open(uid(1), { rpc: 'SubscribeToJWTBundles' }).error?.code, GrpcStatus.UNIMPLEMENTED);
  });

  it('closes every open stream with UNAVAILABLE on shutdown', async () => {
    const { service, open, addPod } = setup();
    addPod(uid(1), 'web');
    const call = open(uid(1));
    await flushMicrotasks();
    assert.equal(service.openStreams, 1);
    service.closeAll();
    assert.equal(call.error?.code, GrpcStatus.UNAVAILABLE);
    assert.equal(service.openStreams, 0);
  });
});
