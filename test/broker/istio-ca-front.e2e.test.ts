/**
 * The node-local Istio CA front end to end, driven by a client that behaves on the wire exactly
 * as released ztunnel does (test/broker/support/ztunnel_ca_client.py: Debian's python3-grpcio and
 * python3-cryptography; P-256 CSR, empty subject, one critical URI SAN, Bearer token, clusterid,
 * Struct ImpersonatedIdentity, validity_duration = SECRET_TTL; TLS to localhost:<port> verified
 * against the mesh root for the name "localhost"), against the devcluster over HTTPS (RBAC
 * enforced), the real CA over TLS and the node broker. Every denial is the CA's generic
 * UNAUTHENTICATED, answered by the broker without a CA call (counted on the CA's metrics).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { X509Certificate, createPublicKey } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { credentials, type ChannelCredentials, type Client, type ServiceError } from '@grpc/grpc-js';
import { ISTIO_CA_FRONT_DEFAULTS, startBroker, type Broker } from '../../src/broker/index.js';
import { loadProtos, lookup, protoRootFor } from '../../src/grpc/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { createLogger } from '../../src/core/log.js';
import { SkipClock } from '../support/skip-clock.js';
import { TEST_PYTHON, opensslMissing, pythonGrpcMissing, writePythonGrpcStubs } from '../support/tools.js';
import { listServices, reflectionClient } from '../support/grpc-reflection.js';
import { cacertsFiles, makePluginCa, opensslVerifyChain, writeCacertsAtomic, type PluginCa } from '../ca/support/pki-fixtures.js';
import { removeTempDir, tempDirSync } from '../support/scratch.js';
import { parsePemBlocksOfType } from '../../src/pki/pem.js';
import { BROKER_NS, NODE, Stack, TD, tokenFor } from './support/stack.js';
import { eventually } from './support/eventually.js';
import { frontConfig } from './support/front-config.js';

const run = promisify(execFile);
const skip = pythonGrpcMissing() ?? opensslMissing();
const CLIENT = [
  fileURLToPath(new URL('./support/ztunnel_ca_client.py', import.meta.url)),
  fileURLToPath(new URL('../../../test/broker/support/ztunnel_ca_client.py', import.meta.url)),
].find((p) => existsSync(p))!;

const ZTUNNEL_ID = `spiffe://${TD}/ns/istio-system/sa/ztunnel`;
const cartId = `spiffe://${TD}/ns/shop/sa/cart`;
const webId = `spiffe://${TD}/ns/shop/sa/web`;
/** ztunnel's default SECRET_TTL. */
const SECRET_TTL = 24 * 3600;

interface PyRequest {
  readonly token: string;
  readonly san: string;
  readonly impersonate?: string;
  readonly ttl?: number;
  readonly clusterid?: string;
  readonly bad_csr?: 'garbage' | 'signature';
}
type PyResult = { readonly cert_chain: string[]; readonly spki_pem: string } | { readonly code: string; readonly details: string };

/** Runs the ztunnel-like client once for a batch of requests (one Python start); `serverName` is ALT_CA_HOSTNAME. */
async function ztunnelClient(
  at: { readonly dir: string; readonly stubs: string; readonly port: number; readonly rootsPem: string; readonly serverName?: string },
  requests: readonly PyRequest[],
): Promise<PyResult[]> {
  const rootsFile = join(at.dir, 'roots.pem');
  await writeFile(rootsFile, at.rootsPem);
  const spec = {
    target: `localhost:${at.port}`,
    roots_file: rootsFile,
    ...(at.serverName ? { server_name: at.serverName } : {}),
    requests: await Promise.all(
      requests.map(async (r, i) => {
        const tokenFile = join(at.dir, `token-${i}`);
        await writeFile(tokenFile, r.token);
        const { token: _t, ...rest } = r;
        return { token_file: tokenFile, ttl: SECRET_TTL, ...rest };
      }),
    ),
  };
  const specFile = join(at.dir, 'spec.json');
  await writeFile(specFile, JSON.stringify(spec));
  const { stdout } = await run(TEST_PYTHON, [CLIENT, at.stubs, specFile], { timeout: 60_000 });
  return JSON.parse(stdout) as PyResult[];
}

/** Python stubs for istio/v1/auth/ca.proto in `dir`/stubs. */
async function caStubs(dir: string): Promise<string> {
  const stubs = join(dir, 'stubs');
  await mkdir(stubs, { recursive: true });
  const root = protoRootFor('istio/v1/auth/ca.proto');
  await writePythonGrpcStubs(root, stubs, ['istio/v1/auth/ca.proto']);
  return stubs;
}

/** The certificate the front presents to a TLS client asking for `servername`. */
function servedCertificate(port: number, servername: string, rootsPem: string): Promise<X509Certificate> {
  return new Promise<X509Certificate>((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, servername, ca: rootsPem, ALPNProtocols: ['h2'] }, () => {
      const c = s.getPeerX509Certificate();
      s.destroy();
      if (c) resolve(c);
      else reject(new Error('no certificate'));
    });
    s.once('error', reject);
  });
}

for (const transport of ['h2', 'http2'] as const) {
  describe(`Istio CA front: released ztunnel on the wire (${transport})`, { skip }, () => {
    let stack: Stack;
    let broker: Broker;
    let clock: SkipClock;
    let stubs: string;
    const tokens: Record<string, string> = {};
    /** The broker's log lines (warn and up). */
    const logs: string[] = [];

    /** Runs the ztunnel-like client once for a batch of requests (one Python start). */
    const py = (requests: readonly PyRequest[]) => ztunnelClient({ dir: stack.dir, stubs, port: broker.istioCaFrontPort!, rootsPem: stack.ca.rootsPem() }, requests);

    /** CreateCertificate calls the CA has answered so far (every outcome). */
    async function caCalls(): Promise<number> {
      return (await stack.ca.metrics.requests.get()).values.reduce((n, v) => n + v.value, 0);
    }

    /** The front's request counter for one reason. */
    async function frontCount(reason: string): Promise<number> {
      const text = await broker.metrics.registry.getSingleMetricAsString('certbroker_broker_istio_ca_front_requests_total');
      const line = text.split('\n').find((l) => l.includes(`reason="${reason}"`));
      return line ? Number(line.split(' ').at(-1)) : 0;
    }

    before(async () => {
      stack = await Stack.start({ tmpPrefix: 'istio-ca-front-', namespaces: ['shop'], serviceAccounts: ['shop/cart', 'shop/web'] });
      stubs = await caStubs(stack.dir);
      await stack.createPod({ namespace: 'istio-system', name: 'ztunnel-local', serviceAccount: 'ztunnel', nodeName: NODE });
      await stack.createPod({ namespace: 'istio-system', name: 'ztunnel-remote', serviceAccount: 'ztunnel', nodeName: 'node-2' });
      await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
      await stack.createPod({ namespace: 'shop', name: 'web-remote', serviceAccount: 'web', nodeName: 'node-2' });
      clock = new SkipClock();
      broker = await startBroker({ ...stack.brokerConfig({ clock, logger: createLogger({ level: 'warn', sink: (l) => logs.push(l) }) }), istioCaFront: frontConfig({ transport }) });
      await broker.whenReady(AbortSignal.timeout(20_000));
      await eventually('pods on the node', () => broker.pods.byKey('shop', 'cart-0') && broker.pods.byKey(BROKER_NS, 'ztunnel-local'));
      tokens.local = (await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-local')).reveal();
      tokens.remote = (await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-remote')).reveal();
      tokens.cart = (await stack.podToken('shop', 'cart', 'cart-0')).reveal();
      tokens.wrongAudience = (await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-local', 'other')).reveal();
    });

    after(async () => {
      await broker?.stop(500);
      await stack?.close();
    });

    it('serves ztunnel its own SVID and an impersonated one; chain leaf, root last; the key is the CSR\'s; openssl verifies', async () => {
      const before = await caCalls();
      const [own, cart] = await py([
        { token: tokens.local!, san: ZTUNNEL_ID },
        { token: tokens.local!, san: cartId, impersonate: cartId },
      ]);
      for (const [res, id] of [[own, ZTUNNEL_ID], [cart, cartId]] as const) {
        assert.ok(res && 'cert_chain' in res, JSON.stringify(res));
        const chain = res.cert_chain;
        assert.equal(chain.length, 2, 'self-signed CA: leaf, root bundle');
        assert.equal(chain[1], stack.ca.rootsPem(), 'the root bundle is the last element');
        assert.equal(checkX509Svid(chain[0]!)?.id, id);
        const leaf = new X509Certificate(chain[0]!);
        assert.ok(leaf.publicKey.export({ type: 'spki', format: 'der' }).equals(createPublicKey(res.spki_pem).export({ type: 'spki', format: 'der' })), "the leaf holds the CSR's key");
        assert.equal(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom), (SECRET_TTL + 120) * 1000, 'validity_duration reached the CA');
        assert.match(await opensslVerifyChain(chain), /OK/);
      }
      assert.equal((await caCalls()) - before, 2, 'one CA call per request');
    });

    it("the front's certificate: chained to the mesh root, DNS localhost and IP 127.0.0.1, the broker's SPIFFE ID as its one URI SAN", async () => {
      const served = await servedCertificate(broker.istioCaFrontPort!, 'localhost', stack.ca.rootsPem());
      assert.equal(served.subjectAltName, `DNS:localhost, IP Address:127.0.0.1, URI:${broker.ownIdentity}`);
      assert.equal(served.checkHost('localhost'), 'localhost');
      assert.ok(served.verify(new X509Certificate(stack.ca.rootsPem()).publicKey));
    });

    it('node-authorization matrix: another node, wrong account, unbound, no pod on the node, foreign trust domain, wrong audience or cluster -> UNAUTHENTICATED without a CA call; a CSR that is not one -> INVALID_ARGUMENT without one', async () => {
      const unbound = await tokenFor(stack.core, BROKER_NS, 'ztunnel', { audience: 'istio-ca', expirationSeconds: 3600 });
      const cases: Array<{ req: PyRequest; code: string; reason: string }> = [
        { req: { token: tokens.remote!, san: ZTUNNEL_ID }, code: 'UNAUTHENTICATED', reason: 'ERR_FRONT_CALLER_NOT_ON_NODE' },
        { req: { token: tokens.remote!, san: cartId, impersonate: cartId }, code: 'UNAUTHENTICATED', reason: 'ERR_FRONT_CALLER_NOT_ON_NODE' },
        { req: { token: tokens.cart!, san: cartId }, code: 'UNAUTHENTICATED', reason: 'ERR_FRONT_CALLER_NOT_ALLOWED' },
        { req: { token: unbound.reveal(), san: ZTUNNEL_ID }, code: 'UNAUTHENTICATED', reason: 'ERR_FRONT_CALLER_NOT_POD_BOUND' },
        { req: { token: tokens.local!, san: webId, impersonate: webId }, code: 'UNAUTHENTICATED', reason: 'ERR_FRONT_NO_POD_ON_NODE' },
        { req: { token: tokens.local!, san: cartId, impersonate: 'spiffe://other.td/ns/shop/sa/cart' }, code: 'UNAUTHENTICATED', reason: 'ERR_FRONT_IDENTITY_INVALID' },
        { req: { token: tokens.wrongAudience!, san: ZTUNNEL_ID }, code: 'UNAUTHENTICATED', reason: 'ERR_CA_TOKEN_INVALID' },
        { req: { token: tokens.local!, san: ZTUNNEL_ID, clusterid: 'elsewhere' }, code: 'UNAUTHENTICATED', reason: 'ERR_FRONT_UNKNOWN_CLUSTER' },
        { req: { token: 'not-a-jwt', san: ZTUNNEL_ID }, code: 'UNAUTHENTICATED', reason: 'ERR_CA_TOKEN_MALFORMED' },
        { req: { token: tokens.local!, san: cartId, impersonate: cartId, bad_csr: 'garbage' }, code: 'INVALID_ARGUMENT', reason: 'ERR_PKI_' },
      ];
      const countsBefore = await Promise.all(cases.map((c) => (c.reason.endsWith('_') ? 0 : frontCount(c.reason))));
      const callsBefore = await caCalls();
      const results = await py(cases.map((c) => c.req));
      assert.equal(await caCalls(), callsBefore, 'no request reached the CA');
      for (const [i, c] of cases.entries()) {
        const r = results[i]!;
        assert.ok('code' in r, `case ${i} (${c.reason}) was answered with a certificate`);
        assert.equal(r.code, c.code, `case ${i} (${c.reason}): ${JSON.stringify(r)}`);
        if (c.code === 'UNAUTHENTICATED') assert.equal(r.details, 'authentication failed', 'the caller learns nothing more, as from istiod');
        if (!c.reason.endsWith('_')) assert.ok((await frontCount(c.reason)) > countsBefore[i]!, `case ${i}: reason ${c.reason} counted`);
      }
      // Each denial's precise reason is in the broker's log (what the caller is not told), no token is.
      const denials = logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((r) => r.msg === 'CreateCertificate denied');
      for (const c of cases.filter((x) => x.code === 'UNAUTHENTICATED')) {
        assert.ok(denials.some((r) => r.reason === c.reason && typeof r.detail === 'string' && r.detail !== ''), `${c.reason} logged with its detail`);
      }
      for (const t of [tokens.local!, tokens.remote!, tokens.cart!, unbound.reveal()]) assert.ok(!logs.some((l) => l.includes(t)), 'no token in the log');
    });

    it("the caller's token is reviewed once (TokenReview, audience istio-ca) and the review reused by the next calls", async () => {
      const reviews = async (result: string): Promise<number> => {
        const text = await broker.metrics.registry.getSingleMetricAsString('certbroker_broker_istio_ca_front_token_reviews_total');
        const line = text.split('\n').find((l) => l.includes(`result="${result}"`));
        return line ? Number(line.split(' ').at(-1)) : 0;
      };
      const posted = () => stack.dc.requestLog.entries({ method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews' }).length;
      const fresh = (await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-local')).reveal();
      const [miss, hit, apiBefore] = [await reviews('miss'), await reviews('hit'), posted()];
      const results = await py([1, 2, 3].map(() => ({ token: fresh, san: ZTUNNEL_ID })));
      for (const r of results) assert.ok('cert_chain' in r, JSON.stringify(r));
      assert.equal((await reviews('miss')) - miss, 1, 'one TokenReview for the new token');
      assert.equal((await reviews('hit')) - hit, 2, 'the next two calls answered from the cache');
      // The front's one review, and at most one by the CA of the broker's own token (its cache is 60 s).
      assert.ok(posted() - apiBefore <= 2, `${posted() - apiBefore} TokenReviews reached the API server for 3 calls`);
    });

    it("a TTL over the CA's maximum and a CSR whose signature does not verify are the CA's INVALID_ARGUMENT, relayed (one CA call each)", async () => {
      const before = await caCalls();
      const results = await py([
        { token: tokens.local!, san: cartId, impersonate: cartId, ttl: 365 * 86_400 },
        { token: tokens.local!, san: cartId, impersonate: cartId, bad_csr: 'signature' },
      ]);
      for (const r of results) {
        assert.ok('code' in r, JSON.stringify(r));
        assert.equal(r.code, 'INVALID_ARGUMENT', JSON.stringify(r));
      }
      assert.equal((await caCalls()) - before, 2);
      assert.ok((await frontCount('ERR_FRONT_CA_DENIED')) >= 2, 'counted as the CA refusing the request');
    });

    it('health (SERVING) and reflection over TLS, like the CA', async () => {
      const creds = credentials.createSsl(Buffer.from(stack.ca.rootsPem()));
      const target = `localhost:${broker.istioCaFrontPort}`;
      type Unary = (req: unknown, cb: (err: ServiceError | null, res?: Record<string, unknown>) => void) => void;
      const Health = lookup<new (a: string, c: ChannelCredentials) => Client & { Check: Unary }>(loadProtos(['grpc/health/v1/health.proto']).grpcObject, 'grpc.health.v1.Health');
      const health = new Health(target, creds);
      try {
        for (const service of ['', 'istio.v1.auth.IstioCertificateService']) {
          const res = await new Promise<Record<string, unknown> | ServiceError>((resolve) => health.Check({ service }, (err, r) => resolve(err ?? r!)));
          assert.deepEqual(res, { status: 'SERVING' }, service);
        }
      } finally {
        health.close();
      }
      const reflection = reflectionClient(target, creds);
      try {
        assert.ok((await listServices(reflection)).includes('istio.v1.auth.IstioCertificateService'));
      } finally {
        reflection.close();
      }
    });

    it("rotates its certificate at half-life like the broker's own SVID: new connections get the new one", async () => {
      const first = broker.istioCaFrontCerts!.current(broker.ownIdentity)!;
      clock.skip((first.notAfter - first.notBefore) * 0.75);
      const second = await eventually('front certificate renewed', () => {
        const c = broker.istioCaFrontCerts!.current(broker.ownIdentity);
        return c && c.serial !== first.serial ? c : undefined;
      });
      const [res] = await py([{ token: tokens.local!, san: ZTUNNEL_ID }]);
      assert.ok(res && 'cert_chain' in res, `ztunnel still verifies the renewed certificate: ${JSON.stringify(res)}`);
      assert.notEqual(second.serial, first.serial);
    });
  });
}

describe('Istio CA front on a plug-in CA (cacerts) mid root rotation, with an ALT_CA_HOSTNAME-style name', { skip }, () => {
  const ALT = 'node-ca.istio-system.svc';
  let cacerts: string;
  let old: PluginCa;
  let fresh: PluginCa;
  let stack: Stack;
  let broker: Broker;
  let clock: SkipClock;
  let stubs: string;
  let token: string;

  before(async () => {
    // Both roots published (the rotation's overlap), the old root's intermediate still signing.
    old = await makePluginCa('Old');
    fresh = await makePluginCa('New');
    cacerts = tempDirSync('istio-ca-front-cacerts-');
    await writeCacertsAtomic(cacerts, cacertsFiles(old, [fresh.root]));
    stack = await Stack.start({
      tmpPrefix: 'istio-ca-front-alt-',
      namespaces: ['shop'],
      serviceAccounts: ['shop/cart'],
      ca: { grantableServingNames: ['localhost', '127.0.0.1', ALT], signer: { kind: 'cacerts', dir: cacerts } },
    });
    stubs = await caStubs(stack.dir);
    await stack.createPod({ namespace: 'istio-system', name: 'ztunnel-local', serviceAccount: 'ztunnel', nodeName: NODE });
    await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    clock = new SkipClock();
    broker = await startBroker({ ...stack.brokerConfig({ clock }), istioCaFront: frontConfig({ servingNames: [...ISTIO_CA_FRONT_DEFAULTS.servingNames, ALT] }) });
    await broker.whenReady(AbortSignal.timeout(20_000));
    await eventually('pods on the node', () => broker.pods.byKey(BROKER_NS, 'ztunnel-local') && broker.pods.byKey('shop', 'cart-0'));
    token = (await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-local')).reveal();
  });

  after(async () => {
    await broker?.stop(500);
    await stack?.close();
    if (cacerts) await removeTempDir(cacerts);
  });

  it("Istio's answer shape: leaf, the intermediate, then one last element holding both roots; openssl verifies under each bundle", async () => {
    const before = await ztunnelClient({ dir: stack.dir, stubs, port: broker.istioCaFrontPort!, rootsPem: stack.ca.rootsPem() }, [
      { token, san: ZTUNNEL_ID },
      { token, san: cartId, impersonate: cartId },
    ]);
    for (const [res, id] of [[before[0], ZTUNNEL_ID], [before[1], cartId]] as const) {
      assert.ok(res && 'cert_chain' in res, JSON.stringify(res));
      const chain = res.cert_chain;
      assert.equal(chain.length, 3, 'leaf, intermediate, root bundle');
      assert.equal(checkX509Svid(chain[0]!)?.id, id);
      assert.equal(new X509Certificate(chain[1]!).fingerprint256, new X509Certificate(old.intermediate.der).fingerprint256, 'the signing intermediate, on its own');
      const roots = parsePemBlocksOfType(chain[2]!, 'CERTIFICATE').map((der) => new X509Certificate(der).fingerprint256);
      assert.deepEqual(roots, [old.root, fresh.root].map((r) => new X509Certificate(r.der).fingerprint256), 'both roots in the last element');
      assert.match(await opensslVerifyChain(chain), /OK/);
    }
  });

  it('the served certificate names localhost, 127.0.0.1 and the alt name; ztunnel verifying for the alt name is served; so after a rotation', async () => {
    const at = { dir: stack.dir, stubs, port: broker.istioCaFrontPort!, rootsPem: stack.ca.rootsPem(), serverName: ALT };
    const served = await servedCertificate(at.port, ALT, at.rootsPem);
    assert.equal(served.subjectAltName, `DNS:localhost, DNS:${ALT}, IP Address:127.0.0.1, URI:${broker.ownIdentity}`);
    assert.equal(served.checkHost(ALT), ALT);
    const [res] = await ztunnelClient(at, [{ token, san: ZTUNNEL_ID }]);
    assert.ok(res && 'cert_chain' in res, `verified for ${ALT}: ${JSON.stringify(res)}`);

    const first = broker.istioCaFrontCerts!.current(broker.ownIdentity)!;
    clock.skip((first.notAfter - first.notBefore) * 0.75);
    await eventually('front certificate renewed', () => broker.istioCaFrontCerts!.current(broker.ownIdentity)?.serial !== first.serial || undefined);
    const renewed = await eventually('the renewed certificate served', async () => {
      const c = await servedCertificate(at.port, ALT, at.rootsPem);
      return c.serialNumber !== served.serialNumber ? c : undefined;
    });
    assert.equal(renewed.subjectAltName, served.subjectAltName, 'the renewal keeps the alt name');
    const [again] = await ztunnelClient(at, [{ token, san: ZTUNNEL_ID }]);
    assert.ok(again && 'cert_chain' in again, `still verified for ${ALT} after the rotation: ${JSON.stringify(again)}`);
  });
});
