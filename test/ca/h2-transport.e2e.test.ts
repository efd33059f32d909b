/**
 * The lean TLS transports (CA_TRANSPORT=http2 on node:http2, CA_TRANSPORT=h2 on certbroker's engine) against grpc-js clients: same results and
 * codes as the grpc-js transport for CreateCertificate, health Check, UNIMPLEMENTED for the
 * rest, graceful stop. (Python grpcio also talks to it: python-interop.e2e.test.ts.)
 */
import { after, before, describe, test } from 'node:test';
import { connect as h2connect } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { deflateSync, gzipSync } from 'node:zlib';
import assert from 'node:assert/strict';
import { credentials, status, type Client, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import type { CaServer } from '../../src/ca/index.js';
import { loadProtos, lookup } from '../../src/grpc/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { caClient, lastDenialReason, startNodeAScenario, TD, tokenReviews, type CaEnv } from './support/ca-env.js';
import { newCsr, opensslVerifyChain } from './support/pki-fixtures.js';
import { fileContainingSymbol, linkProblems, listServices, reflectionClient } from '../support/grpc-reflection.js';
import { frameBytes, rawCaSession, requestFrame } from './support/raw-grpc.js';
import { SkipClock } from '../support/skip-clock.js';
import { opensslMissing } from '../support/tools.js';

for (const kind of ['http2', 'h2'] as const) {
describe(`${kind} transport`, () => {
  let env: CaEnv;
  let ca: CaServer;
  let ztunnel: string;

  before(async () => {
    ({ env, ca, ztunnel } = await startNodeAScenario({ transport: kind, signingWorkers: 1 }));
  });

  after(async () => {
    await env?.close();
  });

  test(`${kind} transport: issues (own and impersonated identity); chain verifies`, { skip: opensslMissing() }, async () => {
    const c = caClient(ca.port, ca.rootsPem());
    try {
      const own = await c.create({ token: ztunnel, csr: await newCsr() });
      assert.equal(own.code, undefined, JSON.stringify(own));
      assert.equal(checkX509Svid(own.chain![0]!)?.id, `spiffe://${TD}/ns/istio-system/sa/ztunnel`);
      const imp = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: `spiffe://${TD}/ns/default/sa/sleep`, ttlSeconds: 600 });
      assert.equal(imp.code, undefined, JSON.stringify(imp));
      assert.equal(checkX509Svid(imp.chain![0]!)?.id, `spiffe://${TD}/ns/default/sa/sleep`);
      assert.equal(imp.chain![imp.chain!.length - 1], ca.rootsPem());
      assert.match(await opensslVerifyChain(imp.chain!), /OK/);
    } finally {
      c.close();
    }
  });

  test(`${kind} transport: same codes as grpc-js (denied, TTL over max, bad CSR, no token)`, async () => {
    const c = caClient(ca.port, ca.rootsPem());
    try {
      const denied = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: `spiffe://${TD}/ns/default/sa/nobody` });
      assert.equal(denied.code, status.UNAUTHENTICATED);
      assert.equal(denied.details, 'authentication failed');
      assert.equal(denied.errorCode, 'ERR_CA_UNAUTHENTICATED');
      assert.equal(lastDenialReason(env.logs), 'ERR_CA_NO_POD_ON_NODE');
      const ttl = await c.create({ token: ztunnel, csr: await newCsr(), ttlSeconds: 30 * 86_400 });
      assert.equal(ttl.code, status.INVALID_ARGUMENT);
      assert.equal(ttl.errorCode, 'ERR_CA_TTL_OVER_MAX');
      assert.match(ttl.details ?? '', /greater than the max allowed TTL/);
      const bad = await c.create({ token: ztunnel, csr: 'garbage' });
      assert.equal(bad.code, status.INVALID_ARGUMENT);
      const none = await c.create({ csr: await newCsr() });
      assert.equal(none.code, status.UNAUTHENTICATED);
      assert.equal(lastDenialReason(env.logs), 'ERR_CA_NO_TOKEN');
    } finally {
      c.close();
    }
  });

  type Unary = (req: unknown, cb: (err: ServiceError | null, res?: Record<string, unknown>) => void) => void;
  type Streaming = (req: unknown) => NodeJS.ReadableStream & { cancel(): void };

  test(`${kind} transport: health Check here; Watch, List and reflection relayed to grpc-js; unknown methods UNIMPLEMENTED`, async () => {
    const { grpcObject } = loadProtos(['grpc/health/v1/health.proto']);
    const opts = { 'grpc.ssl_target_name_override': 'localhost' };
    const creds = credentials.createSsl(Buffer.from(ca.rootsPem()));
    const Health = lookup<new (a: string, c: ChannelCredentials, o: Record<string, string>) => Client & { Check: Unary; List: Unary; Watch: Streaming }>(grpcObject, 'grpc.health.v1.Health');
    const h = new Health(`127.0.0.1:${ca.port}`, creds, opts);
    try {
      const ok = await new Promise<Record<string, unknown> | ServiceError>((resolve) => h.Check({ service: '' }, (e, r) => resolve(e ?? r!)));
      assert.deepEqual(ok, { status: 'SERVING' });
      const unknown = await new Promise<ServiceError | undefined>((resolve) => h.Check({ service: 'nope' }, (e) => resolve(e ?? undefined)));
      assert.equal(unknown?.code, status.NOT_FOUND);
      const list = await new Promise<Record<string, unknown> | ServiceError>((resolve) => h.List({}, (e, r) => resolve(e ?? r!)));
      assert.deepEqual(Object.keys((list as { statuses: Record<string, unknown> }).statuses).sort(), ['', 'istio.v1.auth.IstioCertificateService']);
      const watch = h.Watch({ service: 'istio.v1.auth.IstioCertificateService' });
      const first = await new Promise<{ status: string }>((resolve, reject) => {
        watch.once('data', (m: { status: string }) => resolve(m));
        watch.once('error', reject);
      });
      assert.deepEqual(first, { status: 'SERVING' });
      watch.on('error', () => undefined);
      watch.cancel();
    } finally {
      h.close();
    }

    const r = reflectionClient(`127.0.0.1:${ca.port}`, creds, opts);
    const services = await listServices(r);
    const files = await fileContainingSymbol(r, 'istio.v1.auth.IstioCertificateService');
    r.close();
    assert.deepEqual(files.map((f) => f.name).sort(), ['google/protobuf/struct.proto', 'istio/v1/auth/ca.proto']);
    assert.deepEqual(linkProblems(files), [], 'descriptors link as protoc/grpcurl link them');
    const svc = files.flatMap((f) => f.service ?? []).find((x) => x.name === 'IstioCertificateService');
    assert.deepEqual(svc?.method?.map((m) => m.name), ['CreateCertificate'], 'the descriptor comes through the relay');
    assert.ok(services.includes('istio.v1.auth.IstioCertificateService'), services.join(','));

    const { makeGenericClientConstructor } = await import('@grpc/grpc-js');
    const Generic = makeGenericClientConstructor(
      { Nope: { path: '/no.such.Service/Nope', requestStream: false, responseStream: false, requestSerialize: (x: Buffer) => x, requestDeserialize: (x: Buffer) => x, responseSerialize: (x: Buffer) => x, responseDeserialize: (x: Buffer) => x } },
      'NoSuch',
    );
    const g = new Generic(`127.0.0.1:${ca.port}`, creds, opts) as unknown as Client & { Nope: (req: Buffer, cb: (e: ServiceError | null) => void) => void };
    const nope = await new Promise<ServiceError | null>((resolve) => g.Nope(Buffer.alloc(0), (e) => resolve(e)));
    g.close();
    assert.equal(nope?.code, status.UNIMPLEMENTED);
  });

  test(`${kind} transport: malformed requests get the spec's statuses (malformed protobuf INVALID_ARGUMENT, not INTERNAL) and never take the server down`, async () => {
    const raw = rawCaSession(ca);
    const auth = { authorization: `Bearer ${ztunnel}` };
    const valid = requestFrame({ csr: await newCsr() });
    const get = await raw.call({ ':method': 'GET', 'content-type': 'text/plain' }, undefined);
    assert.equal(get.http, 415);
    // Request cardinality (statuscodes.md): none or two messages for a unary method.
    assert.equal((await raw.call(auth, undefined)).grpc, status.UNIMPLEMENTED, 'no message');
    assert.equal((await raw.call(auth, Buffer.concat([valid, valid]))).grpc, status.UNIMPLEMENTED, 'two messages');
    // Malformed request bytes: INVALID_ARGUMENT.
    assert.equal((await raw.call(auth, Buffer.from([0, 0, 0]))).grpc, status.INVALID_ARGUMENT, 'truncated prefix');
    assert.equal((await raw.call(auth, frameBytes(Buffer.alloc(10), { declaredLength: 40 }))).grpc, status.INVALID_ARGUMENT, 'truncated message');
    const reviews = tokenReviews(env);
    const fresh = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const garbage = await raw.call({ authorization: `Bearer ${fresh}` }, Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]));
    assert.equal(garbage.grpc, status.INVALID_ARGUMENT, 'garbage protobuf');
    assert.equal(garbage.metadata['certbroker-error-code'], 'ERR_CA_REQUEST_MALFORMED');
    assert.equal(decodeURIComponent(garbage.metadata['grpc-message'] ?? ''), 'request message cannot be parsed');
    assert.equal(tokenReviews(env), reviews, 'refused before any TokenReview');
    // Compression (PROTOCOL-HTTP2.md, compression.md, grpc-go's checkRecvPayload).
    assert.equal((await raw.call(auth, frameBytes(Buffer.from([0x0a, 0x01, 0x41]), { flag: 1 }))).grpc, status.INTERNAL, 'compressed flag without grpc-encoding');
    assert.equal((await raw.call({ ...auth, 'grpc-encoding': 'identity' }, frameBytes(Buffer.from([0x0a, 0x01, 0x41]), { flag: 1 }))).grpc, status.INTERNAL, 'compressed flag with identity');
    assert.equal((await raw.call(auth, frameBytes(Buffer.from([0x0a, 0x01, 0x41]), { flag: 2 }))).grpc, status.INTERNAL, 'flag 2');
    const snappy = await raw.call({ ...auth, 'grpc-encoding': 'snappy' }, frameBytes(Buffer.from([1, 2, 3]), { flag: 1 }));
    assert.equal(snappy.grpc, status.UNIMPLEMENTED, 'unsupported encoding');
    assert.equal(snappy.metadata['grpc-accept-encoding'], 'identity,deflate,gzip');
    assert.equal((await raw.call({ ...auth, 'grpc-encoding': 'gzip' }, frameBytes(Buffer.from('not gzip'), { flag: 1 }))).grpc, status.INTERNAL, 'gzip that does not inflate');
    assert.equal((await raw.call({ ...auth, 'grpc-encoding': 'gzip' }, frameBytes(gzipSync(Buffer.alloc(300 * 1024)), { flag: 1 }))).grpc, status.RESOURCE_EXHAUSTED, 'inflates past the size limit');
    // gzip and deflate are decompressed, as grpc-js does.
    const body = valid.subarray(5);
    assert.equal((await raw.call({ ...auth, 'grpc-encoding': 'gzip' }, frameBytes(gzipSync(body), { flag: 1 }))).grpc, status.OK, 'gzip');
    assert.equal((await raw.call({ ...auth, 'grpc-encoding': 'deflate' }, frameBytes(deflateSync(body), { flag: 1 }))).grpc, status.OK, 'deflate');
    assert.equal((await raw.call(auth, frameBytes(Buffer.alloc(300 * 1024)))).grpc, status.RESOURCE_EXHAUSTED, 'over the size limit');
    await raw.call({}, undefined, { resetAfterMs: 20 }); // reset mid-body
    raw.close();
    const invalid = (await ca.metrics.requests.get()).values.find((v) => v.labels.outcome === 'invalid' && v.labels.reason === 'ERR_CA_REQUEST_MALFORMED');
    assert.equal(invalid?.value, 1, 'counted as invalid, not as an error');
    // Still serving.
    const c = caClient(ca.port, ca.rootsPem());
    try {
      assert.equal((await c.create({ token: ztunnel, csr: await newCsr() })).code, undefined);
    } finally {
      c.close();
    }
  });

  test(`${kind} transport: grpc-timeout is honoured (DEADLINE_EXCEEDED while the TokenReview is slow; a roomy deadline succeeds)`, async () => {
    // A raw client does not enforce the deadline itself: only the server can end the call.
    const raw = rawCaSession(ca);
    const call = async (token: string, timeout: string) =>
      (await raw.call({ authorization: `Bearer ${token}`, 'grpc-timeout': timeout }, requestFrame({ csr: await newCsr(), validity_duration: 600 }))).grpc;
    try {
      assert.equal(await call(ztunnel, '30S'), status.OK, 'a roomy deadline');
      const fresh = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
      env.cluster.faults.setLatency(1000); // the fresh token's TokenReview takes 1 s
      assert.equal(await call(fresh, '100m'), status.DEADLINE_EXCEEDED);
    } finally {
      env.cluster.faults.clear();
      raw.close();
    }
  });

  test(`${kind} transport: graceful stop lets an in-flight call finish`, async () => {
    const s = await env.startCa({ transport: kind, signingWorkers: 0 });
    const c = caClient(s.port, s.rootsPem());
    try {
      assert.equal((await c.create({ token: ztunnel, csr: await newCsr() })).code, undefined);
      const fresh = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
      env.cluster.faults.setLatency(300);
      const misses = async () => (await s.metrics.tokenReviewCache.get()).values.find((v) => v.labels.result === 'miss')?.value ?? 0;
      const before = await misses();
      const inflight = c.create({ token: fresh, csr: await newCsr() });
      while ((await misses()) === before) await new Promise((r) => setTimeout(r, 2));
      const stopping = s.stop();
      const r = await inflight;
      await stopping;
      assert.equal(r.code, undefined, JSON.stringify(r));
      assert.ok(env.logs.some((l) => l.includes('"msg":"CA stopped"') && l.includes('"shutdown":"graceful"')));
      const late = await c.create({ token: ztunnel, csr: await newCsr() });
      assert.equal(late.code, status.UNAVAILABLE);
    } finally {
      env.cluster.faults.clear();
      c.close();
    }
  });

  test(`${kind} transport: a client that resets its connection mid-call is logged (debug, rate-limited per kind), not swallowed`, async (t) => {
    const clock = new SkipClock();
    const own = await env.startCa({ transport: kind, clock });
    t.after(() => own.stop());
    const lines = () =>
      env.logs
        .map((l) => JSON.parse(l) as { msg?: string; level?: string; code?: string; suppressed?: number; port?: number })
        .filter((l) => l.msg === 'http2 transport: session error' && l.code === 'ECONNRESET');
    const before = lines().length;
    /** Opens a call, sends part of its body, then resets the TCP connection under the TLS session. */
    const resetMidCall = async () => {
      let tcp: Socket | undefined;
      const session = h2connect(`https://127.0.0.1:${own.port}`, {
        createConnection: () => {
          tcp = netConnect(own.port, '127.0.0.1');
          return tlsConnect({ socket: tcp, ca: own.rootsPem(), servername: 'localhost', ALPNProtocols: ['h2'] });
        },
      });
      session.on('error', () => undefined);
      const call = session.request({ ':method': 'POST', ':path': '/istio.v1.auth.IstioCertificateService/CreateCertificate', 'content-type': 'application/grpc' });
      call.on('error', () => undefined);
      call.write(Buffer.from([0, 0, 0, 0, 9]));
      await new Promise<void>((resolve) => session.once('remoteSettings', () => resolve()));
      await new Promise((r) => setTimeout(r, 50));
      tcp!.resetAndDestroy();
    };
    const untilAsync = async (pred: () => Promise<boolean>, what: string) => {
      for (let i = 0; i < 500 && !(await pred()); i++) await new Promise((r) => setTimeout(r, 10));
      assert.ok(await pred(), what);
    };
    const until = (pred: () => boolean, what: string) => untilAsync(async () => pred(), what);

    await resetMidCall();
    await until(() => lines().length === before + 1, 'the reset logged');
    assert.equal(lines().at(-1)!.level, 'debug', 'a client going away is not a warning');
    // Two more within the interval: held back.
    for (let i = 0; i < 2; i++) {
      await resetMidCall();
      await untilAsync(async () => /certbroker_ca_open_connections 0\b/.test(await own.metrics.registry.getSingleMetricAsString('certbroker_ca_open_connections')), 'the reset connection gone at the CA');
    }
    assert.equal(lines().length, before + 1, 'rate-limited');
    // After the interval the next one is logged with the count of those held back.
    clock.skip(10_000);
    await resetMidCall();
    await until(() => lines().length === before + 2, 'logged again after the interval');
    assert.equal(lines().at(-1)!.suppressed, 2);
  });
});
}
