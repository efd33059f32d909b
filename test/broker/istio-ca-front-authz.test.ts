/**
 * The Istio CA front's local decisions, on plain data: `FrontAuthorizer` over a real `NodePods`
 * (who may call, whose identity it may have) and `CallerLimits` on a FakeClock (concurrency and
 * rate per caller pod), and `IstioCaFrontService` over them with a CA answer given per test (a
 * leaf of the CSR's key, or of another: somebody else's misbehaving CA).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CallerLimits, FrontAuthorizer, NodePods, type PodFacts } from '../../src/broker/index.js';
import { FakeClock } from '../support/fake-clock.js';
import { IstioCaFrontService, type CsrForwarder } from '../../src/broker/fronts/istio-ca/index.js';
import { createLogger, silentLogger } from '../../src/core/log.js';
import { createCsr, csrPublicKeyInfo } from '../../src/pki/csr.js';
import { exportSpkiDer, generateKeyPair } from '../../src/pki/keys.js';

const TD = 'cluster.local';
const retainer = { retain: () => undefined, release: () => undefined };
const pod = (over: Partial<PodFacts>): PodFacts => ({
  uid: 'u',
  namespace: 'istio-system',
  name: 'ztunnel-abc',
  serviceAccount: 'ztunnel',
  nodeName: 'node-1',
  hostNetwork: false,
  deleting: false,
  phase: 'Running',
  ...over,
});

function setup(options: { synced?: boolean } = {}) {
  const pods = new NodePods({ nodeName: 'node-1', trustDomain: TD, certs: retainer, now: () => 0, ownPodUid: 'broker-uid' });
  pods.upsert(pod({ uid: 'zt-1' }));
  pods.upsert(pod({ uid: 'zt-host', name: 'ztunnel-host', hostNetwork: true }));
  pods.upsert(pod({ uid: 'zt-done', name: 'ztunnel-done', phase: 'Failed' }));
  pods.upsert(pod({ uid: 'zt-other', name: 'ztunnel-other', nodeName: 'node-2' }));
  pods.upsert(pod({ uid: 'cart-1', namespace: 'shop', name: 'cart-0', serviceAccount: 'cart' }));
  pods.upsert(pod({ uid: 'web-x', namespace: 'shop', name: 'web-0', serviceAccount: 'web', nodeName: 'node-2' }));
  pods.upsert(pod({ uid: 'batch-1', namespace: 'shop', name: 'batch-0', serviceAccount: 'batch', phase: 'Succeeded' }));
  const authz = new FrontAuthorizer({ trustDomain: TD, allowedAccounts: ['istio-system/ztunnel'], pods, podsSynced: () => options.synced ?? true });
  return { pods, authz };
}

const ztunnel = { namespace: 'istio-system', serviceAccount: 'ztunnel', podName: 'ztunnel-abc', podUid: 'zt-1' };

describe('FrontAuthorizer', () => {
  it("grants the caller's own identity, or an identity a pod of this node holds", () => {
    const { authz } = setup();
    assert.deepEqual(authz.authorize(ztunnel, undefined), { identity: `spiffe://${TD}/ns/istio-system/sa/ztunnel`, callerPodUid: 'zt-1', callerAccount: 'istio-system/ztunnel' });
    assert.equal(authz.authorize(ztunnel, '').identity, `spiffe://${TD}/ns/istio-system/sa/ztunnel`);
    assert.equal(authz.authorize(ztunnel, `spiffe://${TD}/ns/shop/sa/cart`).identity, `spiffe://${TD}/ns/shop/sa/cart`);
    // A host-network ztunnel is on the node too (it gets no identity of its own from the cache, but may ask).
    assert.equal(authz.authorize({ ...ztunnel, podName: 'ztunnel-host', podUid: 'zt-host' }, `spiffe://${TD}/ns/shop/sa/cart`).callerPodUid, 'zt-host');
  });

  it('refuses, each with its own code: account off the list, unbound token, a pod of another node / finished / unknown / another name or account, not synced', () => {
    const { authz } = setup();
    const code = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        assert.equal((err as { status?: string }).status, 'unauthenticated');
        return (err as { code?: string }).code;
      }
      return 'granted';
    };
    assert.equal(code(() => authz.authorize({ ...ztunnel, serviceAccount: 'cart', namespace: 'shop' }, undefined)), 'ERR_FRONT_CALLER_NOT_ALLOWED');
    assert.equal(code(() => authz.authorize({ namespace: 'istio-system', serviceAccount: 'ztunnel' }, undefined)), 'ERR_FRONT_CALLER_NOT_POD_BOUND');
    assert.equal(code(() => authz.authorize({ ...ztunnel, podName: 'ztunnel-other', podUid: 'zt-other' }, undefined)), 'ERR_FRONT_CALLER_NOT_ON_NODE');
    assert.equal(code(() => authz.authorize({ ...ztunnel, podName: 'ztunnel-done', podUid: 'zt-done' }, undefined)), 'ERR_FRONT_CALLER_NOT_ON_NODE');
    assert.equal(code(() => authz.authorize({ ...ztunnel, podUid: 'nope' }, undefined)), 'ERR_FRONT_CALLER_NOT_ON_NODE');
    assert.equal(code(() => authz.authorize({ ...ztunnel, podName: 'ztunnel-renamed' }, undefined)), 'ERR_FRONT_CALLER_NOT_ON_NODE');
    // The token says pod cart-1 runs as ztunnel: the pod says otherwise.
    assert.equal(code(() => authz.authorize({ ...ztunnel, namespace: 'istio-system', podName: 'cart-0', podUid: 'cart-1' }, undefined)), 'ERR_FRONT_CALLER_NOT_ON_NODE');
    assert.equal(code(() => setup({ synced: false }).authz.authorize(ztunnel, undefined)), 'ERR_FRONT_PODS_NOT_SYNCED');
  });

  it('refuses impersonation of a service account without a pod here that gets an identity, and of anything that is not a Kubernetes ID of the trust domain', () => {
    const { authz } = setup();
    const code = (id: string) => {
      try {
        authz.authorize(ztunnel, id);
        return 'granted';
      } catch (err) {
        return (err as { code?: string }).code;
      }
    };
    assert.equal(code(`spiffe://${TD}/ns/shop/sa/web`), 'ERR_FRONT_NO_POD_ON_NODE', 'its pod runs on node-2');
    assert.equal(code(`spiffe://${TD}/ns/shop/sa/batch`), 'ERR_FRONT_NO_POD_ON_NODE', 'its pod finished');
    assert.equal(code(`spiffe://${TD}/ns/istio-system/sa/certbroker-node`), 'ERR_FRONT_NO_POD_ON_NODE');
    assert.equal(code(`spiffe://other.td/ns/shop/sa/cart`), 'ERR_FRONT_IDENTITY_INVALID');
    assert.equal(code(`spiffe://${TD}/shop/cart`), 'ERR_FRONT_IDENTITY_INVALID');
    assert.equal(code('not a spiffe id'), 'ERR_FRONT_IDENTITY_INVALID');
  });
});

describe('CallerLimits', () => {
  it('bounds the requests in flight per caller; a release frees a slot (once, however often it is called)', () => {
    const limits = new CallerLimits({ clock: new FakeClock(), ratePerSecond: 1000, burst: 1000, maxInFlight: 2 });
    const a = limits.acquire('pod-a');
    const b = limits.acquire('pod-a');
    assert.throws(() => limits.acquire('pod-a'), { code: 'ERR_FRONT_RATE_LIMITED', status: 'resource-exhausted', retryAfterMs: undefined }, 'in flight, no call ended yet: no pushback (no time to say)');
    limits.acquire('pod-b')(); // another caller is not affected
    a();
    a();
    assert.equal(limits.inFlight('pod-a'), 1);
    limits.acquire('pod-a');
    b();
    assert.equal(limits.inFlight('pod-a'), 1);
  });

  it('over the in-flight bound the pushback is the caller\'s typical call duration, once a call has ended', async () => {
    const clock = new FakeClock();
    const limits = new CallerLimits({ clock, ratePerSecond: 1000, burst: 1000, maxInFlight: 1 });
    let release = limits.acquire('p');
    await clock.advance(200);
    release(); // the first call took 200 ms
    release = limits.acquire('p');
    assert.throws(() => limits.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED', retryAfterMs: 200 });
    limits.acquire('q')(); // another caller is not limited
    await clock.advance(40);
    release(); // 40 ms: the average moves a quarter of the way, 200 -> 160
    release();
    release = limits.acquire('p');
    assert.throws(() => limits.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED', retryAfterMs: 160 });
    release(); // 0 ms: 160 -> 120
    limits.acquire('p');
    assert.throws(() => limits.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED', retryAfterMs: 120 });
    const fast = new CallerLimits({ clock, ratePerSecond: 1000, burst: 1000, maxInFlight: 1 });
    fast.acquire('p')(); // a call that took no time at all
    fast.acquire('p');
    assert.throws(() => fast.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED', retryAfterMs: 1 }, 'at least 1 ms');
  });

  it('a burst, then the sustained rate, on the injected clock', async () => {
    const clock = new FakeClock();
    const limits = new CallerLimits({ clock, ratePerSecond: 2, burst: 3, maxInFlight: 100 });
    for (let i = 0; i < 3; i++) limits.acquire('p')();
    // Over the rate: the pushback is the time until a whole token is back (2/s: 500 ms from empty).
    assert.throws(() => limits.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED', retryAfterMs: 500 });
    await clock.advance(499);
    assert.throws(() => limits.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED', retryAfterMs: 1 }, 'not a whole token yet');
    await clock.advance(1);
    limits.acquire('p')();
    assert.throws(() => limits.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED' });
    await clock.advance(60_000);
    for (let i = 0; i < 3; i++) limits.acquire('p')(); // refilled to the burst, not past it
    assert.throws(() => limits.acquire('p'), { code: 'ERR_FRONT_RATE_LIMITED' });
  });

  it('forgets idle callers when full, never one with requests in flight', () => {
    const limits = new CallerLimits({ clock: new FakeClock(), ratePerSecond: 1, burst: 1, maxInFlight: 1, maxCallers: 2 });
    limits.acquire('busy');
    limits.acquire('idle')();
    limits.acquire('new')(); // 'idle' (bucket empty but nothing in flight) makes room; 'busy' stays
    assert.equal(limits.inFlight('busy'), 1);
    assert.throws(() => limits.acquire('busy'), { code: 'ERR_FRONT_RATE_LIMITED' });
  });
});

describe('IstioCaFrontService: what it checks of the CA answer, and its bounds as statuses', () => {
  /** A CA that signs the identity asked for but answers with a leaf of `leafKey` (somebody else's misbehaving CA when not the CSR's). */
  async function service(options: { leafKey?: 'csr' | 'other'; burst?: number; hangUntilAborted?: boolean; logLines?: string[] } = {}) {
    const { authz } = setup();
    const other = await generateKeyPair();
    const calls: string[] = [];
    const forwarder: CsrForwarder = {
      forwardCsr: async (req, signal) => {
        calls.push(req.identity);
        if (options.hangUntilAborted) {
          // As the lean channel does: the abandoned call rejects with the signal's reason (an AbortError).
          await new Promise((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }));
        }
        const spki = options.leafKey === 'other' ? exportSpkiDer(other.publicKey) : csrPublicKeyInfo(req.csrPem);
        return { certChain: ['LEAF', 'ROOTS'], leafSpki: spki };
      },
    };
    const svc = new IstioCaFrontService({
      clusterId: 'Kubernetes',
      authenticator: { authenticate: async () => ztunnel },
      authorizer: authz,
      limits: new CallerLimits({ clock: new FakeClock(), ratePerSecond: 1, burst: options.burst ?? 10, maxInFlight: 4 }),
      forwarder,
      logger: options.logLines ? createLogger({ level: 'debug', sink: (line) => options.logLines!.push(line) }) : silentLogger,
    });
    const csr = createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: `spiffe://${TD}/ns/shop/sa/cart` }).pem;
    const request = { csr, validity_duration: 3600, metadata: { fields: { ImpersonatedIdentity: { stringValue: `spiffe://${TD}/ns/shop/sa/cart` } } } };
    const metadata = { get: (key: string) => (key === 'authorization' ? ['Bearer t'] : []) };
    return { svc, calls, call: (signal?: AbortSignal) => svc.createCertificate(request as never, metadata as never, signal) };
  }

  it("relays the CA's chain as it came when the leaf holds the CSR's key", async () => {
    const { call, calls } = await service();
    assert.deepEqual(await call(), { cert_chain: ['LEAF', 'ROOTS'] });
    assert.deepEqual(calls, [`spiffe://${TD}/ns/shop/sa/cart`], 'ImpersonatedIdentity forwarded as the granted identity');
  });

  it("a leaf that does not hold the CSR's key is never answered: ERR_CA_BAD_RESPONSE, UNAVAILABLE to the caller", async () => {
    const { svc, call } = await service({ leafKey: 'other' });
    const err = await call().then(() => assert.fail('answered'), (e: unknown) => e);
    assert.equal((err as { code?: string }).code, 'ERR_CA_BAD_RESPONSE');
    assert.equal(svc.rejection(err, 'test').code, 14, 'UNAVAILABLE');
  });

  it('over its burst the caller gets RESOURCE_EXHAUSTED, with no CA call', async () => {
    const { svc, call, calls } = await service({ burst: 2 });
    await call();
    await call();
    const err = await call().then(() => assert.fail('answered'), (e: unknown) => e);
    assert.equal((err as { code?: string }).code, 'ERR_FRONT_RATE_LIMITED');
    assert.equal(svc.rejection(err, 'test').code, 8, 'RESOURCE_EXHAUSTED');
    assert.equal(calls.length, 2);
  });

  it('a caller that resets or runs out of time while the CA works: ERR_FRONT_CALL_CANCELLED (CANCELLED), not an unexpected error', async () => {
    const logLines: string[] = [];
    const { svc, call } = await service({ hangUntilAborted: true, logLines });
    const caller = new AbortController();
    const pending = call(caller.signal);
    setImmediate(() => caller.abort());
    const err = await pending.then(() => assert.fail('answered'), (e: unknown) => e);
    assert.equal((err as { code?: string }).code, 'ERR_FRONT_CALL_CANCELLED');
    assert.equal(svc.rejection(err, 'test').code, 1, 'CANCELLED');
    assert.deepEqual(logLines.filter((l) => l.includes('"level":"error"')), [], 'no error logged for a caller that went away');
  });
});
