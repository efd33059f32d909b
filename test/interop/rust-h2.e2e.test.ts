/**
 * Interop with Rust's HTTP/2 stack, the one ztunnel calls the CA with (tonic over hyper over the
 * `h2` crate, TLS by rustls): certbroker's own client (test/interop/rust-h2-client: hyper 0.14's
 * HTTP/2-only client connection over tokio-rustls, ALPN h2, requests shaped as tonic's, messages
 * hand-encoded) built from Debian's crate sources, offline, by test/support/rust-main.ts. Against
 * the real CA (devcluster, TLS trusting the mesh root) on each of its transports and against the
 * node broker's Istio CA front on each of its: issue (chain checked by openssl), refusals, health,
 * many concurrent streams on one hyper connection (past SETTINGS_MAX_CONCURRENT_STREAMS, with
 * hyper's adaptive window and keep-alive PINGs), a request larger than the 64 KiB initial windows,
 * a graceful stop (GOAWAY) with held calls in flight, and calls hyper cancels (RST_STREAM(CANCEL))
 * half-sent or after the whole request, beside calls the connection still serves.
 *
 * The first build takes ~80 s here (2 cores, nothing cached); the binary is then cached under the
 * OS temp dir. Skipped, with the reason, where cargo or Debian's crate sources are missing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import type { CaServer } from '../../src/ca/index.js';
import { ISTIO_CA_FRONT_DEFAULTS, startBroker, type Broker } from '../../src/broker/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { startCaEnv, TD, waitForIndex, type CaEnv } from '../ca/support/ca-env.js';
import { makePluginCa, newCsr, opensslVerifyChain, tempDir, writeCacerts, type PluginCa } from '../ca/support/pki-fixtures.js';
import { eventually } from '../broker/support/eventually.js';
import { BROKER_NS, NODE, Stack } from '../broker/support/stack.js';
import { rustH2, rustH2Binary, rustH2Missing, spawnRustH2, type RustCall, type RustRun } from '../support/rust-main.js';
import { until } from '../support/until.js';
import { opensslMissing } from '../support/tools.js';

const skip = rustH2Missing() ?? opensslMissing();
const CA_SERVICE = 'istio.v1.auth.IstioCertificateService';
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;
const GRPC = { OK: 0, INVALID_ARGUMENT: 3, NOT_FOUND: 5, RESOURCE_EXHAUSTED: 8, UNAUTHENTICATED: 16 };

/** The one call of a run; the run's connection was HTTP/2 by ALPN and ended cleanly. */
function only(run: RustRun): RustCall {
  assert.equal(run.alpn, 'h2');
  assert.equal(run.calls.length, 1);
  assert.equal(run.connection, 'closed', JSON.stringify(run));
  return run.calls[0]!;
}

/** A call answered with gRPC status `code` over a clean HTTP/2 200 application/grpc response. */
function assertGrpc(c: RustCall, code: number): void {
  assert.equal(c.error, undefined, JSON.stringify(c));
  assert.equal(c.http_status, 200, JSON.stringify(c));
  assert.match(c.content_type, /^application\/grpc(\+proto)?$/, JSON.stringify(c));
  assert.equal(c.grpc_status, code, JSON.stringify(c));
}

/** Every call of a run OK, the connection closed cleanly at the end. */
function assertAllOk(run: RustRun, n: number): void {
  assert.equal(run.calls.length, n);
  const failed = run.calls.filter((c) => c.error !== undefined || c.grpc_status !== GRPC.OK);
  assert.deepEqual(failed.slice(0, 3), [], `${failed.length} of ${n} calls failed`);
  assert.equal(run.ok_calls, n);
  assert.equal(run.connection, 'closed');
}

/** Until a new TCP connection to `port` is refused (the listener closed). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = netConnect(port, '127.0.0.1');
    s.once('connect', () => (s.destroy(), resolve(false)));
    s.once('error', () => resolve(true));
  });
}

describe('hyper (Rust h2, rustls) against the CA (each transport)', { skip }, () => {
  let env: CaEnv;
  let work: { path: string; remove: () => Promise<void> };
  let plugin: PluginCa;
  let signer: { kind: 'cacerts'; dir: string };
  let ztunnel: string;
  const cas = new Map<string, CaServer>();
  const KINDS = ['h2 (default)', 'http2', 'grpc-js'] as const;
  const transportOf = (kind: string) => (kind === 'h2 (default)' ? {} : { transport: kind as 'http2' | 'grpc-js' });

  before(async () => {
    work = await tempDir('ca-rust-');
    const binary = rustH2Binary();
    binary.catch(() => undefined); // awaited below; a build failure fails before()
    env = await startCaEnv();
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    plugin = await makePluginCa('RustInterop');
    await mkdir(join(work.path, 'cacerts'));
    await writeCacerts(join(work.path, 'cacerts'), plugin);
    signer = { kind: 'cacerts', dir: join(work.path, 'cacerts') };
    for (const kind of KINDS) cas.set(kind, await env.startCa({ signer, ...transportOf(kind) }));
    for (const ca of cas.values()) await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
    await writeFile(join(work.path, 'roots.pem'), cas.get('h2 (default)')!.rootsPem());
    await writeFile(join(work.path, 'csr.pem'), await newCsr());
    ztunnel = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    await writeFile(join(work.path, 'ztunnel-token'), ztunnel);
    await writeFile(join(work.path, 'bad-token'), 'not-a-token');
    await writeFile(join(work.path, 'bad-csr.pem'), 'not a csr');
    await binary;
  });

  after(async () => {
    await env?.close();
    await work?.remove();
  });

  const tls = (ca: CaServer) => ['--target', `127.0.0.1:${ca.port}`, '--roots', join(work.path, 'roots.pem'), '--server-name', 'localhost'];
  /** ztunnel's request for sleep's SVID (token, ImpersonatedIdentity, clusterid, SECRET_TTL-like TTL). */
  const issue = (ca: CaServer, ...extra: string[]) => [
    'ca-create', ...tls(ca), '--token-file', join(work.path, 'ztunnel-token'), '--csr-file', join(work.path, 'csr.pem'),
    '--impersonate', SLEEP, '--ttl', '7200', '--cluster-id', 'Kubernetes', ...extra,
  ];

  async function assertSleepChain(c: RustCall, ca: CaServer): Promise<void> {
    assertGrpc(c, GRPC.OK);
    const chain = c.cert_chain!;
    assert.equal(chain.length, 3, 'leaf, intermediate, root');
    assert.equal(checkX509Svid(chain[0]!)?.id, SLEEP);
    const leaf = new X509Certificate(chain[0]!);
    assert.equal(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom), 7200_000 + 120_000, 'validity_duration honoured (plus the backdating)');
    assert.equal(chain[1], plugin.intermediate.pem);
    assert.equal(chain[2], ca.rootsPem());
    assert.match(await opensslVerifyChain(chain), /OK/);
  }

  for (const kind of KINDS) {
    it(`${kind}: ztunnel's request (tonic's headers, te: trailers, streaming body) is issued sleep's SVID; openssl verifies the chain`, async () => {
      const ca = cas.get(kind)!;
      const c = only(await rustH2(issue(ca, '--grpc-timeout', '10S')));
      await assertSleepChain(c, ca);
      assert.equal(c.trailers_only, false);
      assert.equal(c.messages, 1);
      // The same in one DATA frame carrying END_STREAM; and with the token HPACK "never indexed".
      await assertSleepChain(only(await rustH2(issue(ca, '--body-once'))), ca);
      await assertSleepChain(only(await rustH2(issue(ca, '--sensitive'))), ca);
    });

    it(`${kind}: a bad token is UNAUTHENTICATED; a CSR that is not one and undecodable request bytes are INVALID_ARGUMENT; 40 KB of headers reset (not on grpc-js)`, async () => {
      const ca = cas.get(kind)!;
      const bad = only(await rustH2(issue(ca, '--token-file', join(work.path, 'bad-token'))));
      assertGrpc(bad, GRPC.UNAUTHENTICATED);
      assert.equal(bad.grpc_message, 'authentication failed');
      assert.equal(bad.messages, 0);
      const csr = only(await rustH2(issue(ca, '--csr-file', join(work.path, 'bad-csr.pem'))));
      assertGrpc(csr, GRPC.INVALID_ARGUMENT);
      assert.match(csr.error_code, /^ERR_PKI_(PEM|CSR)_/);
      const garbage = only(await rustH2(issue(ca, '--raw-request', '0a7f')));
      assertGrpc(garbage, GRPC.INVALID_ARGUMENT);
      assert.equal(garbage.error_code, 'ERR_CA_REQUEST_MALFORMED');
      if (kind === 'grpc-js') return; // no header-list bound there (docs/security.md)
      // Headers past the CA's 16 KiB on hyper's first call, sent before the SETTINGS ACK: reset.
      // ENHANCE_YOUR_CALM. On node:http2 one loaded CI-like run saw RST_STREAM(INTERNAL_ERROR)
      // instead, and node's source shows how: its header callback submits ENHANCE_YOUR_CALM and fails
      // with nghttp2's temporal callback failure, for which nghttp2 queues an INTERNAL_ERROR reset of
      // its own; node sends its reset at once unless a write is in progress, when it defers it, and
      // then nghttp2's goes first. Still reset, never served, which is what this checks there.
      const big = only(await rustH2(issue(ca, '--meta', `x-big=${'a'.repeat(40_000)}`)));
      const resets = kind === 'http2' ? /excessive load generating behavior|unexpected internal error encountered/ : /excessive load generating behavior/;
      assert.match(big.error ?? '', resets, JSON.stringify(big));
      assert.equal(big.grpc_status, null, 'reset, not answered');
    });

    it(`${kind}: health Check SERVING for the server and the CA service, NOT_FOUND for an unknown one`, async () => {
      const ca = cas.get(kind)!;
      for (const service of ['', CA_SERVICE]) {
        const h = only(await rustH2(['health', ...tls(ca), '--service', service]));
        assertGrpc(h, GRPC.OK);
        assert.equal(h.status, 'SERVING', `service '${service}'`);
      }
      assertGrpc(only(await rustH2(['health', ...tls(ca), '--service', 'no.such.Service'])), GRPC.NOT_FOUND);
    });

    // Past node:http2's limit Debian's h2 0.3.13 stalls now and then: its open streams all answered
    // (162 of 250, the frame log shows), it opens none of the queued ones again, the server has none
    // open: a client-side stall (cf. hyper#3559) certbroker's engine never showed in 10 runs of
    // 250-400 streams. On node:http2 the case stays at its limit, 100.
    const streams = kind === 'h2 (default)' ? 250 : 100;
    it(`${kind}: ${streams} concurrent streams on one hyper connection once the CA's SETTINGS are in (${streams > 100 ? "hyper queues past the CA's 100; " : ''}adaptive window, keep-alive PINGs) all succeed`, async () => {
      const ca = cas.get(kind)!;
      const run = await rustH2(issue(ca, '--warmup', '--streams', String(streams), '--adaptive-window', '--keepalive-ms', '20', '--timeout-ms', '60000'), 90_000);
      assertAllOk(run, streams);
      await assertSleepChain(run.calls[streams - 1]!, ca);
    });

    it(`${kind}: a 200 KB request (past the CA's 64 KiB stream window) in 16 KiB DATA frames, and in 1,000-byte frames with hyper's own windows at 64 KiB; 300 KB is RESOURCE_EXHAUSTED`, async () => {
      const ca = cas.get(kind)!;
      await assertSleepChain(only(await rustH2(issue(ca, '--pad', '200000'))), ca);
      await assertSleepChain(only(await rustH2(issue(ca, '--pad', '200000', '--chunk', '1000', '--stream-window', '65535', '--conn-window', '65535'))), ca);
      // Past the CA's 256 KiB: RESOURCE_EXHAUSTED, trailers-only, answered while hyper still sends.
      const over = only(await rustH2(issue(ca, '--pad', '300000')));
      assertGrpc(over, GRPC.RESOURCE_EXHAUSTED);
      assert.equal(over.trailers_only, true);
    });
  }

  // hyper resets a stream whose request body fails with the reason the error carries, and h2
  // resets one whose handles are all dropped (tonic's call future given up) with CANCEL.
  for (const kind of ['h2 (default)', 'http2'] as const) {
    it(`${kind}: hyper cancels 4 of 12 calls on one connection (2 half-sent, RST_STREAM(CANCEL) mid-body; 2 dropped after the whole request, before the answer): the other 8 and a later call on the connection are issued, it ends cleanly, no stream is left open on the CA`, async () => {
      const ca = cas.get(kind)!;
      // Copied: prom-client hands out its live value objects.
      const counted = async () => new Map((await ca.metrics.requests.get()).values.map((x) => [String(x.labels.reason), x.value]));
      const before = await counted();
      const run = await rustH2(issue(ca, '--streams', '12', '--cancel-mid', '2', '--cancel-after', '2', '--late-call'));
      assert.deepEqual(run.calls.map((c) => c.cancelled ?? ''), ['mid', 'mid', 'after', 'after', ...Array<string>(8).fill('')]);
      for (const c of run.calls.slice(0, 2)) assert.match(c.error ?? '', /stream error sent by user: stream no longer needed/, JSON.stringify(c)); // h2's words for its own RST_STREAM(CANCEL)
      for (const c of run.calls.slice(4)) await assertSleepChain(c, ca);
      assert.equal(run.ok_calls, 8);
      await assertSleepChain(run.late_call!, ca);
      assert.equal(run.connection, 'closed', JSON.stringify(run));
      await until(async () => (await ca.metrics.openStreams.get()).values[0]?.value === 0, 'every stream closed on the CA, the cancelled ones too');
      // The two dropped after the whole request reached the handler: signed (the answer met a reset
      // stream) or given up (ERR_CA_CALL_CANCELLED) as the RST_STREAM came before or after the
      // signing; the half-sent two never did. No other outcome was counted.
      const now = await counted();
      const grew = (reason: string) => (now.get(reason) ?? 0) - (before.get(reason) ?? 0);
      assert.deepEqual([...now.keys()].filter((r) => grew(r) !== 0 && r !== 'ok' && r !== 'ERR_CA_CALL_CANCELLED'), []);
      assert.equal(grew('ok') + grew('ERR_CA_CALL_CANCELLED'), 11);
    });
  }

  // h2 0.3.13 opens streams without a limit until the server's SETTINGS arrive (h2 0.4 assumes 100).
  it("h2 (default): 250 streams opened before the CA's SETTINGS arrive: 100 are served, the rest refused with REFUSED_STREAM (hyper: before processing, retryable), the connection stays up", async () => {
    const ca = cas.get('h2 (default)')!;
    const run = await rustH2(issue(ca, '--streams', '250', '--timeout-ms', '60000'), 90_000);
    const refusedStreams = run.calls.filter((c) => c.error?.includes('refused stream before processing'));
    const served = run.calls.filter((c) => c.error === undefined && c.grpc_status === GRPC.OK);
    assert.equal(refusedStreams.length + served.length, 250, JSON.stringify(run.calls.find((c) => !refusedStreams.includes(c) && !served.includes(c))));
    assert.ok(served.length >= 100, `${served.length} served`);
    assert.equal(run.connection, 'closed');
  });

  // grpc-js counts no open streams (the gauge is the HTTP/2 transports'), so its held calls cannot be waited for.
  for (const kind of ['h2 (default)', 'http2'] as const) {
    it(`${kind}: graceful stop with 8 calls held half-sent: hyper sees the GOAWAY, every held call completes, the connection closes without error and a later call is refused`, async () => {
      const ca = await env.startCa({ signer, ...transportOf(kind) });
      await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
      const roots = ca.rootsPem();
      const held = await spawnRustH2([...issue(ca, '--streams', '8', '--late-call')]);
      let stopping: Promise<void> | undefined;
      try {
        await until(async () => (await ca.metrics.openStreams.get()).values[0]?.value === 8, 'the 8 streams open on the CA');
        stopping = ca.stop();
        await until(() => refused(ca.port), 'the CA stopped listening');
        held.go();
        const run = await held.result();
        assertAllOk(run, 8);
        assert.equal(run.calls[0]!.cert_chain?.[2], roots);
        assert.match(await opensslVerifyChain(run.calls[0]!.cert_chain!), /OK/);
        assert.ok(run.late_call?.error !== undefined || (run.late_call?.grpc_status ?? 0) !== GRPC.OK, `the late call was refused: ${JSON.stringify(run.late_call)}`);
        await stopping;
      } finally {
        held.child.kill();
        await (stopping ?? ca.stop());
      }
    });
  }
});

describe("hyper (Rust h2, rustls) against the broker's Istio CA front (each transport)", { skip }, () => {
  const CART = `spiffe://${TD}/ns/shop/sa/cart`;
  const ZTUNNEL = `spiffe://${TD}/ns/istio-system/sa/ztunnel`;
  let stack: Stack;
  const brokers = new Map<string, Broker>();
  let files: string;

  before(async () => {
    const binary = rustH2Binary();
    binary.catch(() => undefined);
    stack = await Stack.start({ tmpPrefix: 'rust-h2-front-', namespaces: ['shop'], serviceAccounts: ['shop/cart'] });
    await stack.createPod({ namespace: BROKER_NS, name: 'ztunnel-local', serviceAccount: 'ztunnel', nodeName: NODE });
    await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    const d = ISTIO_CA_FRONT_DEFAULTS;
    for (const transport of ['h2', 'http2'] as const) {
      // Rate and in-flight bounds above the concurrency case's burst, so the front's own limits do not refuse it.
      const istioCaFront = { host: '127.0.0.1', port: 0, servingNames: d.servingNames, allowedAccounts: d.allowedAccounts, audiences: d.audiences, tokenCacheSeconds: d.tokenCacheSeconds, ratePerSecond: 1000, burst: 1000, maxInFlight: 500, transport };
      const broker = await startBroker({ ...stack.brokerConfig({ name: `rust-${transport}` }), istioCaFront });
      await broker.whenReady(AbortSignal.timeout(20_000));
      await eventually('pods on the node', () => broker.pods.byKey('shop', 'cart-0') && broker.pods.byKey(BROKER_NS, 'ztunnel-local'));
      brokers.set(transport, broker);
    }
    files = join(stack.dir, 'rust-h2-files');
    await mkdir(files);
    await writeFile(join(files, 'roots.pem'), stack.ca.rootsPem());
    await writeFile(join(files, 'token'), (await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-local')).reveal());
    await writeFile(join(files, 'bad-token'), 'not-a-jwt');
    await writeFile(join(files, 'csr.pem'), await newCsr());
    await writeFile(join(files, 'bad-csr.pem'), 'not a csr');
    await binary;
  });

  after(async () => {
    for (const b of brokers.values()) await b.stop(500);
    await stack?.close();
  });

  const front = (transport: string, ...extra: string[]) => [
    '--target', `127.0.0.1:${brokers.get(transport)!.istioCaFrontPort}`, '--roots', join(files, 'roots.pem'), '--server-name', 'localhost', ...extra,
  ];
  const create = (transport: string, ...extra: string[]) =>
    rustH2(['ca-create', ...front(transport, '--token-file', join(files, 'token'), '--csr-file', join(files, 'csr.pem'), '--ttl', '86400', ...extra)], 60_000);

  async function assertIssued(c: RustCall, id: string): Promise<void> {
    assertGrpc(c, GRPC.OK);
    assert.equal(c.cert_chain?.length, 2, 'self-signed CA: leaf, root bundle');
    assert.equal(checkX509Svid(c.cert_chain![0]!)?.id, id);
    assert.equal(c.cert_chain![1], stack.ca.rootsPem());
    assert.match(await opensslVerifyChain(c.cert_chain!), /OK/);
  }

  for (const transport of ['h2', 'http2']) {
    it(`${transport}: ztunnel's own SVID and an impersonated one; openssl verifies both chains`, async () => {
      await assertIssued(only(await create(transport)), ZTUNNEL);
      await assertIssued(only(await create(transport, '--impersonate', CART)), CART);
    });

    it(`${transport}: a bad token is UNAUTHENTICATED, a CSR that is not one INVALID_ARGUMENT; health Check SERVING`, async () => {
      const bad = only(await create(transport, '--token-file', join(files, 'bad-token')));
      assertGrpc(bad, GRPC.UNAUTHENTICATED);
      assert.equal(bad.grpc_message, 'authentication failed');
      assertGrpc(only(await create(transport, '--impersonate', CART, '--csr-file', join(files, 'bad-csr.pem'))), GRPC.INVALID_ARGUMENT);
      const h = only(await rustH2(['health', ...front(transport)]));
      assertGrpc(h, GRPC.OK);
      assert.equal(h.status, 'SERVING');
    });

    const streams = transport === 'h2' ? 150 : 100; // node:http2: at its limit (see the CA's case)
    it(`${transport}: ${streams} concurrent streams on one hyper connection (adaptive window), each forwarded to the CA, all succeed; a 200 KB request too`, async () => {
      const run = await create(transport, '--impersonate', CART, '--warmup', '--streams', String(streams), '--adaptive-window', '--timeout-ms', '50000');
      assertAllOk(run, streams);
      await assertIssued(run.calls[streams - 1]!, CART);
      await assertIssued(only(await create(transport, '--impersonate', CART, '--pad', '200000')), CART);
    });

    it(`${transport}: hyper cancels 4 of 12 calls on one connection (2 half-sent, 2 dropped after the whole request, before the answer): the other 8 and a later call are issued, the connection ends cleanly, and the front counts nothing but issued or ERR_FRONT_CALL_CANCELLED`, async () => {
      const metric = brokers.get(transport)!.metrics.registry.getSingleMetric('certbroker_broker_istio_ca_front_requests_total')!;
      const counted = async () => new Map((await metric.get()).values.map((x) => [String(x.labels.reason), x.value]));
      const before = await counted();
      const run = await create(transport, '--impersonate', CART, '--streams', '12', '--cancel-mid', '2', '--cancel-after', '2', '--late-call');
      assert.deepEqual(run.calls.map((c) => c.cancelled ?? ''), ['mid', 'mid', 'after', 'after', ...Array<string>(8).fill('')]);
      for (const c of run.calls.slice(4)) await assertIssued(c, CART);
      assert.equal(run.ok_calls, 8);
      await assertIssued(run.late_call!, CART);
      assert.equal(run.connection, 'closed', JSON.stringify(run));
      // The two dropped after the whole request reached the front's handler: answered (the answer met a reset stream)
      // or given up as the caller's cancel (ERR_FRONT_CALL_CANCELLED), as the reset came after or before the CA's answer;
      // the half-sent two never did. No other outcome was counted.
      const now = await counted();
      const grew = (reason: string) => (now.get(reason) ?? 0) - (before.get(reason) ?? 0);
      assert.deepEqual([...now.keys()].filter((r) => grew(r) !== 0 && r !== 'ok' && r !== 'ERR_FRONT_CALL_CANCELLED'), []);
      assert.equal(grew('ok') + grew('ERR_FRONT_CALL_CANCELLED'), 11);
    });
  }
});
