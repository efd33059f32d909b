/**
 * What an unauthenticated client can hold at the CA's port (src/ca/limits.ts), on both
 * transports where grpc-js allows it: a stream whose request body never completes is answered
 * DEADLINE_EXCEEDED and closed, an idle session is closed (GOAWAY) while a busy one is not, and
 * SETTINGS_MAX_CONCURRENT_STREAMS is advertised. On the http2 and h2 transports also: the TLS
 * handshake timeout, the connection cap (closed at once), the global stream cap
 * (RESOURCE_EXHAUSTED at once) and oversized headers (RESOURCE_EXHAUSTED, never retried). And
 * malformed protobuf is INVALID_ARGUMENT on grpc-js too. Limits are set small; nothing asserts
 * how long anything took, only what happened (waits are bounded).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as tcpConnect } from 'node:net';
import { status } from '@grpc/grpc-js';
import { DEFAULT_OVERLOAD_HINT, type CaServer, type CaLimits } from '../../src/ca/index.js';
import { CaCallError, fetchFailureInfoOf, IstioCaClient, retryDelay } from '../../src/broker/index.js';
import { Secret } from '../../src/core/secret.js';
import { parseRetryPushbackMs, RETRY_PUSHBACK_METADATA } from '../../src/grpc/index.js';
import { caClient, startNodeAScenario, type CaEnv } from './support/ca-env.js';
import { newCsr } from './support/pki-fixtures.js';
import { until } from '../support/until.js';
import { CREATE_CERTIFICATE_PATH, frameBytes, rawCaSession, requestFrame, type RawResult } from './support/raw-grpc.js';
import { ACK, dataFrame, END_STREAM, ErrorCode, FrameClient, grpcRequestFields, headersFrame, literalBlock, PREFACE, rstStreamFrame, settingsFrame } from '../h2/support/frame-client.js';

const SMALL: Partial<CaLimits> = {
  requestBodyTimeoutMs: 300,
  idleSessionTimeoutMs: 400,
  tlsHandshakeTimeoutMs: 300,
  maxConcurrentStreams: 3,
  maxHeaderListBytes: 8192,
};

let env: CaEnv;
let h2ca: CaServer;
let ztunnel: string;
const cas: Record<'http2' | 'h2' | 'grpc-js', CaServer> = {} as never;

before(async () => {
  ({ env, ca: h2ca, ztunnel } = await startNodeAScenario({ transport: 'http2', limits: SMALL }));
  cas.http2 = h2ca;
  cas.h2 = await env.startCa({ transport: 'h2', limits: SMALL });
  cas['grpc-js'] = await env.startCa({ transport: 'grpc-js', limits: SMALL });
});

after(async () => {
  await env?.close();
});

/** `p`'s value, or `undefined` when it does not settle within `ms` (a bounded wait). */
async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

const counter = async (ca: CaServer, name: 'connectionsClosed' | 'streamsRefused', reason: string) =>
  (await ca.metrics[name].get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

/**
 * A raw-frame connection whose first write is the preface, an empty SETTINGS and `frames`: the
 * streams open before this client could have seen, let alone acknowledged, the CA's SETTINGS.
 */
async function earlyStreams(ca: CaServer, frames: Buffer[]): Promise<FrameClient> {
  const c = await FrameClient.connect({ port: ca.port, rootsPem: ca.rootsPem() });
  c.send(PREFACE, settingsFrame(), ...frames);
  return c;
}

/** A CreateCertificate call on `stream` as ztunnel: its HEADERS and one DATA frame with `message` (ending the request unless `end` is false). */
function grpcCall(stream: number, message: Buffer, extra: ReadonlyArray<readonly [string, string]> = [], end = true): Buffer[] {
  const fields = grpcRequestFields(CREATE_CERTIFICATE_PATH, [['authorization', `Bearer ${ztunnel}`], ...extra]);
  return [headersFrame(stream, literalBlock(fields)), dataFrame(stream, message, end ? END_STREAM : 0)];
}

/** Calls the CA's handler counted so far, whatever their outcome. */
const handledCalls = async (ca: CaServer) => (await ca.metrics.requests.get()).values.reduce((n, v) => n + v.value, 0);

/**
 * On `frames` (handshaken), streams 1 and 3 as CreateCertificate calls reset by RST_STREAM(CANCEL)
 * with no END_STREAM before it (node:http2's client may end a stream first): one inside its gRPC
 * prefix, one right after a whole message, which node:http2 ends as if its body had ended. Each
 * must count `cancelled` once, as a call closed early and not one for the handler.
 */
async function resetInsideAndAfterMessage(ca: CaServer, frames: FrameClient, cancelledBefore: number): Promise<void> {
  const [headers] = grpcCall(1, Buffer.alloc(0), [], false);
  frames.send(headers!, dataFrame(1, Buffer.from([0, 0, 0])));
  assert.ok(await frames.ping(), 'the CA read them');
  frames.send(rstStreamFrame(1, ErrorCode.CANCEL));
  await until(async () => (await counter(ca, 'streamsRefused', 'cancelled')) !== cancelledBefore, 'the reset counted', { timeoutMs: 2000 });
  assert.equal(await counter(ca, 'streamsRefused', 'cancelled'), cancelledBefore + 1);
  frames.send(...grpcCall(3, requestFrame({ csr: await newCsr() }), [], false));
  assert.ok(await frames.ping(), 'the CA read them');
  frames.send(rstStreamFrame(3, ErrorCode.CANCEL));
  await until(async () => (await counter(ca, 'streamsRefused', 'cancelled')) !== cancelledBefore + 1, 'the second reset counted', { timeoutMs: 2000 });
  assert.equal(await counter(ca, 'streamsRefused', 'cancelled'), cancelledBefore + 2);
}

for (const transport of ['http2', 'h2', 'grpc-js'] as const) {
  test(`${transport}: a call whose request body never completes gets DEADLINE_EXCEEDED and its stream is closed`, async () => {
    const ca = cas[transport];
    const raw = rawCaSession(ca);
    const auth = { authorization: `Bearer ${ztunnel}` };
    try {
      const before = await counter(ca, 'streamsRefused', 'body_timeout');
      const headersOnly = await within(raw.call(auth, undefined, { open: true }), 10_000);
      assert.ok(headersOnly, 'answered (a bounded wait)');
      assert.equal(headersOnly.grpc, status.DEADLINE_EXCEEDED);
      assert.match(decodeURIComponent(headersOnly.metadata['grpc-message'] ?? ''), /request message not received within 300 ms/);
      // Half a message, then nothing.
      const partial = await within(raw.call(auth, frameBytes(Buffer.alloc(10), { declaredLength: 100 }).subarray(0, 12), { open: true }), 10_000);
      assert.equal(partial?.grpc, status.DEADLINE_EXCEEDED);
      assert.equal(await counter(ca, 'streamsRefused', 'body_timeout'), before + 2);
      // A complete request on the same session is unaffected.
      assert.equal((await raw.call(auth, requestFrame({ csr: await newCsr() }))).grpc, status.OK);
    } finally {
      raw.close();
    }
  });

  test(`${transport}: an idle session is closed (GOAWAY); one with a call in flight is not`, async () => {
    const ca = cas[transport];
    const idle = rawCaSession(ca);
    const closed = await within(new Promise<boolean>((r) => idle.session.once('close', () => r(true))), 10_000);
    assert.equal(closed, true, 'the idle session was closed by the CA');

    // A call whose TokenReview takes longer than the idle timeout keeps its session.
    const busy = rawCaSession(ca);
    let busyClosedEarly = false;
    busy.session.once('goaway', () => (busyClosedEarly = true));
    try {
      const fresh = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
      env.cluster.faults.setLatency(1200);
      const r = await busy.call({ authorization: `Bearer ${fresh}` }, requestFrame({ csr: await newCsr() }));
      assert.equal(r.grpc, status.OK);
      assert.equal(busyClosedEarly, false, 'not closed as idle while the call ran');
    } finally {
      env.cluster.faults.clear();
      busy.close();
    }
  });

  test(`${transport}: SETTINGS_MAX_CONCURRENT_STREAMS is the configured limit`, async () => {
    const raw = rawCaSession(cas[transport]);
    try {
      const settings = await new Promise<{ maxConcurrentStreams?: number }>((r) => raw.session.once('remoteSettings', r));
      assert.equal(settings.maxConcurrentStreams, SMALL.maxConcurrentStreams);
    } finally {
      raw.close();
    }
  });
}

test('grpc-js: a call reset inside or right after its request message is counted cancelled and never handled; one that ran into the body timeout is not counted twice', async () => {
  const ca = cas['grpc-js'];
  const before = { cancelled: await counter(ca, 'streamsRefused', 'cancelled'), bodyTimeout: await counter(ca, 'streamsRefused', 'body_timeout'), handled: await handledCalls(ca) };
  const frames = await FrameClient.connect({ port: ca.port, rootsPem: ca.rootsPem() });
  try {
    await frames.handshake();
    // grpc-js sees the reset stream's end as a half-close, after a whole message too.
    await resetInsideAndAfterMessage(ca, frames, before.cancelled);
    assert.equal(await handledCalls(ca), before.handled, 'neither reached the handler');
    // Headers only, left to the body timeout: body_timeout once, and its own close is no cancel.
    frames.send(headersFrame(5, literalBlock(grpcRequestFields(CREATE_CERTIFICATE_PATH, [['authorization', `Bearer ${ztunnel}`]]))));
    const end = (await frames.streamEnds([5])).get(5);
    assert.equal(end?.fields['grpc-status'], String(status.DEADLINE_EXCEEDED), JSON.stringify(end));
    await until(async () => (await counter(ca, 'streamsRefused', 'body_timeout')) !== before.bodyTimeout, 'the timeout counted', { timeoutMs: 2000 });
    assert.ok(await frames.ping(), 'the connection serves on');
    assert.equal(await counter(ca, 'streamsRefused', 'body_timeout'), before.bodyTimeout + 1);
    assert.equal(await counter(ca, 'streamsRefused', 'cancelled'), before.cancelled + 2, 'the timed-out call is not also cancelled');
  } finally {
    frames.close();
  }
  // A whole request is the handler's, and its ordinary end is no cancel.
  const raw = rawCaSession(ca);
  try {
    assert.equal((await raw.call({ authorization: `Bearer ${ztunnel}` }, requestFrame({ csr: await newCsr() }))).grpc, status.OK);
  } finally {
    raw.close();
  }
  assert.equal(await handledCalls(ca), before.handled + 1);
  assert.equal(await counter(ca, 'streamsRefused', 'cancelled'), before.cancelled + 2);
});

test('grpc-js: a malformed request message is INVALID_ARGUMENT (ERR_CA_REQUEST_MALFORMED), not INTERNAL', async () => {
  const raw = rawCaSession(cas['grpc-js']);
  try {
    const r = await raw.call({ authorization: `Bearer ${ztunnel}` }, Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]));
    assert.equal(r.grpc, status.INVALID_ARGUMENT);
    assert.equal(r.metadata['certbroker-error-code'], 'ERR_CA_REQUEST_MALFORMED');
  } finally {
    raw.close();
  }
});

test('every transport refuses a request whose last string runs past the end as malformed (protobufjs would keep it, truncated)', async () => {
  // csr (field 1) declared 127 bytes long, 2 follow; then the same with an empty message after the tag.
  for (const message of [Buffer.from([0x0a, 0x7f, 0x41, 0x42]), Buffer.from([0x0a, 0x7f])]) {
    for (const kind of ['grpc-js', 'http2', 'h2'] as const) {
      const raw = rawCaSession(cas[kind]);
      try {
        const r = await raw.call({ authorization: `Bearer ${ztunnel}` }, frameBytes(message));
        assert.equal(r.grpc, status.INVALID_ARGUMENT, `${kind} ${message.toString('hex')}`);
        assert.equal(r.metadata['certbroker-error-code'], 'ERR_CA_REQUEST_MALFORMED', `${kind} ${message.toString('hex')}`);
      } finally {
        raw.close();
      }
    }
  }
});

for (const kind of ['http2', 'h2'] as const) {
  test(`${kind}: a connection that never finishes its TLS handshake is closed`, async () => {
    const before = await counter(cas[kind], 'connectionsClosed', 'tls_handshake_timeout');
    const s = tcpConnect(cas[kind].port, '127.0.0.1');
    s.on('error', () => undefined);
    try {
      const closed = await within(new Promise<boolean>((r) => s.once('close', () => r(true))), 10_000);
      assert.equal(closed, true, 'closed by the CA');
      assert.equal(await counter(cas[kind], 'connectionsClosed', 'tls_handshake_timeout'), before + 1);
    } finally {
      s.destroy();
    }
  });

  test(`${kind}: request headers over the limit get RESOURCE_EXHAUSTED at once (not a retried REFUSED_STREAM); the limit is advertised`, async () => {
    const c = caClient(cas[kind].port, cas[kind].rootsPem());
    const raw = rawCaSession(cas[kind]);
    const settings = new Promise<{ maxHeaderListSize?: number }>((res) => raw.session.once('remoteSettings', res));
    try {
      const csr = await newCsr();
      const big = { 'x-a': 'a'.repeat(3000), 'x-b': 'b'.repeat(3000), 'x-c': 'c'.repeat(3000) };
      // A generous deadline: a retried refusal would end as DEADLINE_EXCEEDED or UNAVAILABLE.
      const r = await c.create({ token: ztunnel, csr, headers: big, deadlineMs: 20_000 });
      assert.equal(r.code, status.RESOURCE_EXHAUSTED, JSON.stringify(r));
      const single = await c.create({ token: ztunnel, csr, headers: { 'x-a': 'a'.repeat(70_000) }, deadlineMs: 20_000 });
      assert.equal(single.code, status.RESOURCE_EXHAUSTED, JSON.stringify(single));
      assert.equal((await c.create({ token: ztunnel, csr, headers: { 'x-a': 'a'.repeat(1000) } })).code, undefined, 'under the limit');
      assert.equal((await settings).maxHeaderListSize, SMALL.maxHeaderListBytes);
    } finally {
      c.close();
      raw.close();
    }
  });

  test(`${kind}: the header-list bound holds for a stream opened before the client acknowledged the CA's SETTINGS (hyper's and tonic's first calls)`, async () => {
    // The request goes out with the client's preface and the CA's SETTINGS stay unacknowledged
    // (raw frames: no client library may wait for them first): node:http2 applies only
    // acknowledged settings, so without a check of our own such streams had no bound.
    // Over the 8 KiB list bound, in one HEADERS frame: under the h2 engine's bound on a block's
    // bytes (twice the list bound), past which a CONTINUATION flood is a connection error.
    const c = await earlyStreams(cas[kind], grpcCall(1, requestFrame({ csr: await newCsr() }), [['x-a', 'a'.repeat(10_000)]]));
    try {
      const early = (await c.streamEnds([1])).get(1);
      assert.equal(early?.how, 'reset', JSON.stringify(early?.fields));
      assert.equal(early?.code, ErrorCode.ENHANCE_YOUR_CALM, 'RST_STREAM(ENHANCE_YOUR_CALM)');
      c.send(settingsFrame([], ACK), ...grpcCall(3, requestFrame({ csr: await newCsr() }), [['x-a', 'a'.repeat(1000)]]));
      assert.equal((await c.streamEnds([3])).get(3)?.fields['grpc-status'], String(status.OK), 'the session serves the next call');
    } finally {
      c.close();
    }
  });

  test(`${kind}: MAX_CONCURRENT_STREAMS holds for streams opened before the client acknowledged the CA's SETTINGS: the 5 past 3 open are refused (REFUSED_STREAM), the session serves the next call`, async () => {
    // As hyper's burst with its preface. Unlike the header-list bound, nghttp2 holds this one
    // before the ACK too: it refuses streams past the value its unacknowledged SETTINGS carry (so
    // the http2 transport needs no count of its own); the h2 engine refuses them the same way.
    // Raw frames, sent with the preface in one write, the CA's SETTINGS never acknowledged: a
    // client library that saw them first would hold the streams back itself (CI saw node:http2 do so).
    const body = requestFrame({ csr: await newCsr() });
    const ids = [1, 3, 5, 7, 9, 11, 13, 15];
    // Held open (the request never ends) until the CA's body timeout answers them.
    const c = await earlyStreams(cas[kind], ids.flatMap((id) => grpcCall(id, body, [], false)));
    try {
      const ends = await c.streamEnds(ids);
      const refused = ids.map((id) => ends.get(id)?.how === 'reset' && ends.get(id)?.code === ErrorCode.REFUSED_STREAM);
      assert.deepEqual(refused, [false, false, false, true, true, true, true, true], JSON.stringify(ids.map((id) => ends.get(id)?.code)));
      for (const id of ids.slice(0, 3)) assert.equal(ends.get(id)?.fields['grpc-status'], String(status.DEADLINE_EXCEEDED), 'held open until the body timeout');
      for (const id of ids.slice(3)) assert.equal(ends.get(id)?.fields[':status'], undefined, 'refused before any answer');
      c.send(settingsFrame([], ACK), ...grpcCall(17, requestFrame({ csr: await newCsr() })));
      assert.equal((await c.streamEnds([17])).get(17)?.fields['grpc-status'], String(status.OK), 'the session serves the next call');
    } finally {
      c.close();
    }
  });

  test(`${kind}: every call answered before its handler is counted by reason: reset inside or right after its request message (cancelled), truncated or doubled (unreadable); the handler's counter does not move`, async () => {
    const ca = cas[kind];
    const raw = rawCaSession(ca);
    const auth = { authorization: `Bearer ${ztunnel}` };
    const handled = () => handledCalls(ca);
    try {
      const before = { cancelled: await counter(ca, 'streamsRefused', 'cancelled'), unreadable: await counter(ca, 'streamsRefused', 'unreadable'), handled: await handled() };
      const frames = await FrameClient.connect({ port: ca.port, rootsPem: ca.rootsPem() });
      try {
        await frames.handshake();
        await resetInsideAndAfterMessage(ca, frames, before.cancelled);
        assert.ok(await frames.ping(), 'the connection serves on');
      } finally {
        frames.close();
      }
      const truncated = await raw.call(auth, frameBytes(Buffer.alloc(10), { declaredLength: 100 }).subarray(0, 12));
      assert.equal(truncated.grpc, status.INVALID_ARGUMENT, JSON.stringify(truncated.metadata));
      const body = requestFrame({ csr: await newCsr() });
      const doubled = await raw.call(auth, Buffer.concat([body, body]));
      assert.equal(doubled.grpc, status.UNIMPLEMENTED, JSON.stringify(doubled.metadata));
      assert.equal(await counter(ca, 'streamsRefused', 'unreadable'), before.unreadable + 2);
      assert.equal(await handled(), before.handled, 'none reached the handler');
      // A whole request is the handler's, counted there.
      assert.equal((await raw.call(auth, body)).grpc, status.OK);
      assert.equal(await handled(), before.handled + 1);
    } finally {
      raw.close();
    }
  });

  test(`${kind}: connections beyond the cap are closed at once, before TLS; a freed slot is usable again`, async () => {
    const capped = await env.startCa({ transport: kind, limits: { ...SMALL, maxConnections: 3, idleSessionTimeoutMs: 60_000 } });
    const sessions = [rawCaSession(capped), rawCaSession(capped), rawCaSession(capped)];
    try {
      await Promise.all(sessions.map((s) => new Promise((r) => s.session.once('connect', r))));
      const over = rawCaSession(capped);
      let connected = false;
      over.session.once('connect', () => (connected = true));
      const closed = await within(new Promise<boolean>((r) => over.session.once('close', () => r(true))), 10_000);
      assert.equal(closed, true, 'the fourth connection was closed');
      assert.equal(connected, false, 'before any TLS handshake');
      assert.equal(await counter(capped, 'connectionsClosed', 'limit'), 1);
      sessions.pop()!.session.destroy();
      await new Promise((r) => setTimeout(r, 50)); // let the CA see the close
      const again = rawCaSession(capped);
      sessions.push(again);
      assert.equal((await again.call({ authorization: `Bearer ${ztunnel}` }, requestFrame({ csr: await newCsr() }))).grpc, status.OK);
    } finally {
      for (const s of sessions) s.close();
    }
  });

  test(`${kind}: beyond CA_MAX_STREAMS open calls a new call gets RESOURCE_EXHAUSTED at once, with a retry pushback the broker's CA client keeps`, async () => {
    const capped = await env.startCa({ transport: kind, limits: { ...SMALL, maxStreams: 4, requestBodyTimeoutMs: 5000 } });
    const a = rawCaSession(capped);
    const b = rawCaSession(capped);
    const auth = { authorization: `Bearer ${ztunnel}` };
    try {
      // Four body-less calls hold every slot (two sessions, the per-session limit is 3).
      const held: Promise<RawResult>[] = [a.call(auth, undefined, { open: true }), a.call(auth, undefined, { open: true }), b.call(auth, undefined, { open: true }), b.call(auth, undefined, { open: true })];
      for (let i = 0; i < 200 && (await capped.metrics.openStreams.get()).values[0]?.value !== 4; i++) await new Promise((r) => setTimeout(r, 10));
      const refused = await within(b.call(auth, requestFrame({ csr: await newCsr() })), 2000);
      assert.equal(refused?.grpc, status.RESOURCE_EXHAUSTED);
      // The pushback (gRFC A6): about the time the open calls take to drain, within the CA's bounds.
      const pushback = parseRetryPushbackMs(refused?.metadata[RETRY_PUSHBACK_METADATA]);
      assert.ok(pushback !== undefined && pushback >= DEFAULT_OVERLOAD_HINT.minMs && pushback <= DEFAULT_OVERLOAD_HINT.maxMs, JSON.stringify(refused?.metadata));
      // The broker's own CA client (grpc-js) turns it into the error's retryAfterMs, which its retry honours.
      const broker = new IstioCaClient({
        address: `127.0.0.1:${capped.port}`,
        caRootsPem: capped.rootsPem(),
        tlsServerName: 'localhost',
        tokens: { token: async () => new Secret(ztunnel) },
        clusterId: 'Kubernetes',
        certTtlSeconds: 3600,
        impersonate: false,
      });
      try {
        const err = await broker.fetchCertificate('spiffe://cluster.local/ns/istio-system/sa/ztunnel', new AbortController().signal).then(
          () => assert.fail('issued past the stream cap'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof CaCallError, String(err));
        assert.equal(err.grpcCode, 'RESOURCE_EXHAUSTED');
        assert.ok(err.retryAfterMs !== undefined && err.retryAfterMs >= DEFAULT_OVERLOAD_HINT.minMs, String(err.retryAfterMs));
        assert.ok(retryDelay(0, undefined, 0, () => 0, undefined, fetchFailureInfoOf(err)) >= err.retryAfterMs);
      } finally {
        broker.close();
      }
      assert.equal(await counter(capped, 'streamsRefused', 'stream_limit'), 2);
      // The held calls end by their body timeout; then calls go through again.
      for (const r of await Promise.all(held)) assert.equal(r.grpc, status.DEADLINE_EXCEEDED);
      assert.equal((await a.call(auth, requestFrame({ csr: await newCsr() }))).grpc, status.OK);
    } finally {
      a.close();
      b.close();
    }
  });
}
