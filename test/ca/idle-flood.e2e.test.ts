/**
 * An unauthenticated idle-connection flood against `certbroker ca` as a child process (so its
 * memory is its own, read from /proc/<pid>/status): raw TCP connections that never start TLS,
 * HTTP/2 sessions that open nothing, and sessions each holding a CreateCertificate stream whose
 * body never comes. No token is ever sent.
 *
 * The CA must cap the connections (those beyond CA_MAX_CONNECTIONS are closed at once), answer
 * the body-less streams with a definite status after CA_REQUEST_BODY_TIMEOUT_SECONDS, close the
 * handshake-less connections after CA_TLS_HANDSHAKE_TIMEOUT_SECONDS and the idle sessions after
 * CA_IDLE_SESSION_TIMEOUT_SECONDS, and its resident memory must stay within a bound derived from
 * the cap (see MEMORY_BOUND_BYTES). The session and stream counts come from its /metrics.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect as h2connect, type ClientHttp2Session } from 'node:http2';
import { connect as tcpConnect, type Socket } from 'node:net';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { caClient, CA_NAMESPACE, CA_SA, startCaEnv, type CaEnv } from './support/ca-env.js';
import { watchLog, writeCaLauncher } from './support/ca-process.js';
import { newCsr, tempDir } from './support/pki-fixtures.js';
import { CREATE_CERTIFICATE_PATH } from './support/raw-grpc.js';
import { until } from '../support/until.js';

/** Connections the CA accepts at once in this test. */
const CAP = 400;
/** Connection attempts in the flood: 5x the cap. */
const ATTEMPTS = 2000;
/** Of those, plain TCP connections that never send a byte (no TLS ClientHello). */
const RAW_TCP = 100;
/**
 * Bound on the CA's RSS growth at the flood's peak over its warmed-up baseline. At most CAP
 * connections are open at once, each one TLS connection + HTTP/2 session (~22 KB in node:http2,
 * issue 10) with OpenSSL's state and buffers, here half of them with an open stream and its
 * headers (~5.5 KB): measured ~50 KB per connection on this machine, so CAP x 50 KB = ~20 MiB
 * (runs: +16.5 to +22 MiB). The bound leaves 2x for GC and allocator timing. Before the limits the
 * same flood (all 2000 held, never reaped) grew the CA by 98 MiB, and by more the longer it lasted.
 */
const MEMORY_BOUND_BYTES = 48 * 1024 * 1024;

let env: CaEnv;
let dir: { path: string; remove: () => Promise<void> };
let child: ChildProcess | undefined;

before(async () => {
  env = await startCaEnv();
  dir = await tempDir('ca-flood-');
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
});

after(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
  }
  await env?.close();
  await dir?.remove();
});

async function rssBytes(pid: number): Promise<number> {
  const s = await readFile(`/proc/${pid}/status`, 'utf8');
  const m = /^VmRSS:\s+(\d+) kB/m.exec(s);
  assert.ok(m, 'VmRSS in /proc/<pid>/status');
  return Number(m[1]) * 1024;
}

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/metrics' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    })
      .on('error', reject)
      .end();
  });
}

/**
 * Connections to `port` the CA's process holds right now, as the kernel sees them: client-side
 * TCP connections to `port` that are ESTABLISHED (/proc/net/tcp and tcp6, rows whose remote port
 * is `port`, state 01) less those still waiting in the listening socket's accept queue (its
 * rx_queue, state 0A), which the kernel establishes before the CA has accepted them, cap or no
 * cap (a loaded CI-like run saw 406 against a cap of 400 before the queue was left out). Unlike
 * the clients' own events, which see a close by the CA only when the event loop gets to it
 * (another connection's TLS can complete first), the kernel moves a socket out of ESTABLISHED the
 * moment the CA's FIN or RST arrives, which on loopback is within the CA's close().
 */
async function establishedTo(port: number): Promise<number> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  let n = 0;
  let queued = 0;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(file, 'utf8').catch(() => '');
    for (const row of text.split('\n').slice(1)) {
      const [, local, rem, st, queues] = row.trim().split(/\s+/);
      if (st === '01' && rem?.endsWith(`:${hexPort}`)) n++;
      if (st === '0A' && local?.endsWith(`:${hexPort}`)) queued += parseInt(queues?.split(':')[1] ?? '0', 16);
    }
  }
  return n - queued;
}

/** The value of one sample line (`name` or `name{labels}`), undefined when absent. */
function metric(text: string, sample: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(sample + ' ')) return Number(line.slice(sample.length + 1));
  }
  return undefined;
}

interface Conn {
  /** Settles when the server closed (or refused) the connection. */
  readonly closed: Promise<void>;
  /** Settles once the connection is up (TCP for raw ones, TLS + HTTP/2 otherwise) or closed. */
  readonly settled: Promise<void>;
  /** True once the connection was up (the CA accepted it). */
  established(): boolean;
  destroy(): void;
}

function rawTcp(port: number): Conn {
  const s: Socket = tcpConnect(port, '127.0.0.1');
  s.on('error', () => undefined);
  let up = false;
  const closed = new Promise<void>((r) => s.once('close', () => r()));
  const connected = new Promise<void>((r) => s.once('connect', () => r()));
  void connected.then(() => (up = true));
  return { closed, settled: Promise.race([closed, connected]), established: () => up, destroy: () => s.destroy() };
}

/**
 * An HTTP/2 session over TLS; with `stream`, one CreateCertificate call with headers only (no
 * body, the request side left open). `grpcStatus` receives the stream's grpc-status if any.
 */
function h2Session(port: number, rootsPem: string, stream: boolean, grpcStatus: (s: number | undefined) => void): Conn {
  const session: ClientHttp2Session = h2connect(`https://localhost:${port}`, { ca: rootsPem, host: '127.0.0.1' } as never);
  let up = false;
  session.on('error', () => undefined);
  const closed = new Promise<void>((r) => session.once('close', () => r()));
  const connected = new Promise<void>((r) => session.once('connect', () => r()));
  session.once('connect', () => {
    up = true;
    if (!stream) return;
    const req = session.request({ ':method': 'POST', ':path': CREATE_CERTIFICATE_PATH, 'content-type': 'application/grpc', te: 'trailers' });
    let code: number | undefined;
    req.on('response', (h) => {
      if (h['grpc-status'] !== undefined) code = Number(h['grpc-status']);
    });
    req.on('trailers', (t) => (code = Number(t['grpc-status'])));
    req.on('error', () => undefined);
    req.on('close', () => grpcStatus(code));
    req.resume();
  });
  return { closed, settled: Promise.race([closed, connected]), established: () => up, destroy: () => session.destroy() };
}

/** Resolves with true when `p` settles within `ms`, false otherwise (a bounded wait, not a timing assertion). */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)));
  try {
    return await Promise.race([p.then(() => true as const), t]);
  } finally {
    clearTimeout(timer);
  }
}

for (const transport of ['http2', 'h2'] as const) {
  test(`idle flood (${transport} transport): ${ATTEMPTS} unauthenticated connections against a cap of ${CAP} are capped, reaped, and the CA's memory stays bounded`, async (t) => {
    const kubeconfig = join(dir.path, 'kubeconfig');
    const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer] });
    await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
    const launcher = await writeCaLauncher(dir.path);
    child = spawn(process.execPath, [launcher, '--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', '127.0.0.1:0'], {
      env: {
        ...process.env,
        CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1',
        CA_SIGNING_WORKERS: '0',
        LOG_LEVEL: 'info',
        CA_TRANSPORT: transport,
        CA_SHUTDOWN_GRACE_SECONDS: '1',
        CA_MAX_CONNECTIONS: String(CAP),
        // Long enough that, on a loaded machine, the flood reaches the cap before the first
        // connections are reaped (each lives handshake or body timeout + idle timeout), and that
        // a session's stream, sent when the client's loaded event loop gets to it, opens before
        // the idle timeout (it was 6 s: seen reaped early under load). The reaping wait below is
        // bounded well above body + idle.
        CA_TLS_HANDSHAKE_TIMEOUT_SECONDS: '10',
        CA_REQUEST_BODY_TIMEOUT_SECONDS: '6',
        CA_IDLE_SESSION_TIMEOUT_SECONDS: '10',
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const pid = child.pid!;
    const log = watchLog(child);
    const opsRec = await log.waitFor((r) => r.msg === 'ops endpoint listening');
    const listening = await log.waitFor((r) => r.msg === 'CA listening');
    const port = Number(listening.port);
    const opsPort = Number(opsRec.port);
    const secret = await env.core.readNamespacedSecret({ namespace: CA_NAMESPACE, name: 'istio-ca-secret' });
    const rootsPem = Buffer.from(secret.data?.['ca-cert.pem'] ?? '', 'base64').toString();

    // Warm up: real calls (TLS, TokenReview, signing) so one-time allocations are in the baseline.
    const token = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
    const c = caClient(port, rootsPem);
    for (let i = 0; i < 20; i++) assert.equal((await c.create({ token, csr: await newCsr() })).code, undefined);
    c.close();
    await new Promise((r) => setTimeout(r, 500));
    const baseline = await rssBytes(pid);

    // The flood, in batches so the listen backlog never overflows (a SYN retry would only slow it).
    const conns: Conn[] = [];
    const statuses: (number | undefined)[] = [];
    // Connections up at the same time, as the clients see them.
    let up = 0;
    let peakUp = 0;
    const track = (c: Conn): Conn => {
      void c.settled.then(() => {
        if (!c.established()) return;
        peakUp = Math.max(peakUp, ++up);
        void c.closed.then(() => up--);
      });
      return c;
    };
    let peakRss = baseline;
    let peakConnections = 0;
    let peakEstablished = 0;
    const sample = async () => {
      peakEstablished = Math.max(peakEstablished, await establishedTo(port));
      peakRss = Math.max(peakRss, await rssBytes(pid));
      const open = metric(await scrape(opsPort), 'certbroker_ca_open_connections');
      if (open !== undefined) peakConnections = Math.max(peakConnections, open);
    };
    // Sampled all through the flood, one sample after another, not only between batches: the
    // peak (the cap reached) is seen even when, on a loaded machine, the first reaped
    // connections free slots before a batch has settled.
    let flooding = true;
    const sampler = (async () => {
      while (flooding) {
        await sample();
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    for (let i = 0; i < RAW_TCP; i++) conns.push(track(rawTcp(port)));
    for (let i = RAW_TCP; i < ATTEMPTS; ) {
      const batch: Conn[] = [];
      for (let j = 0; j < 100 && i < ATTEMPTS; j++, i++) batch.push(track(h2Session(port, rootsPem, i % 2 === 0, (s) => statuses.push(s))));
      conns.push(...batch);
      // Each attempt is either accepted (TLS up) or closed by the CA.
      await Promise.all(batch.map((b) => b.settled));
      await sample();
    }
    flooding = false;
    await sampler;
    const accepted = conns.slice(RAW_TCP).filter((x) => x.established()).length;
    const refused = conns.length - RAW_TCP - accepted;
    await sample();
    t.diagnostic(`baseline RSS ${(baseline / 2 ** 20).toFixed(1)} MiB, peak ${(peakRss / 2 ** 20).toFixed(1)} MiB (+${((peakRss - baseline) / 2 ** 20).toFixed(1)} MiB); accepted ${accepted} of ${ATTEMPTS - RAW_TCP} TLS attempts over the flood (the rest closed at once), at most ${peakUp} at a time as the clients' events saw them (they see a close late), ${peakEstablished} as the kernel saw them; peak open connections (metric) ${peakConnections}`);

    try {
      // Capped: never more than CAP open at once (the raw TCP ones count too), the rest closed at
      // once. (Over the whole flood more than CAP get in: the reaped ones free their slots.) Seen
      // by the CA (its metric) and, independently, by the client side's kernel: the clients' own
      // count can pass CAP for a moment when a new session's TLS completes in the event loop
      // before the CA's close of an old one is read (once 401 of 400 on a loaded machine). The
      // kernel's count may include one connection over the cap that the CA has accepted and is
      // closing in the same callback (the sample is another process's read).
      assert.ok(peakConnections <= CAP, `peak open connections ${peakConnections}, cap ${CAP}`);
      assert.ok(peakEstablished <= CAP + 1, `${peakEstablished} connections held at once (kernel, accept queue left out), cap ${CAP}`);
      assert.ok(peakEstablished > CAP / 2, `the kernel saw the flood (${peakEstablished} established at the peak)`);
      assert.equal(peakConnections, CAP, 'the flood reached the cap');
      assert.ok(refused > 0, 'connections beyond the cap were closed');
      assert.ok(peakRss - baseline <= MEMORY_BOUND_BYTES, `RSS grew ${peakRss - baseline} bytes, bound ${MEMORY_BOUND_BYTES}`);

      // Reaped: every connection the CA accepted is closed by the CA (handshake timeout, body
      // timeout then idle timeout), none by us. Bounded wait: the configured timeouts are 6-10 s.
      const allClosed = await within(Promise.all(conns.map((x) => x.closed)), 90_000);
      assert.ok(allClosed, `${conns.length - (await Promise.all(conns.map((x) => within(x.closed, 0)))).filter(Boolean).length} connections still open`);
      // The body-less streams got a definite status, not a reset.
      assert.ok(statuses.length > 0, 'some body-less streams were accepted');
      assert.deepEqual([...new Set(statuses)], [status.DEADLINE_EXCEEDED], `stream statuses ${JSON.stringify(statuses.slice(0, 20))}`);
      // The clients saw every close; the CA counts its side's close events when its (loaded) event
      // loop gets to them: wait for its gauges to reach 0.
      let m = '';
      await until(async () => {
        m = await scrape(opsPort);
        return metric(m, 'certbroker_ca_open_connections') === 0 && metric(m, 'certbroker_ca_open_streams') === 0;
      }, 'the CA to count every connection and stream closed').catch(() => undefined);
      assert.equal(metric(m, 'certbroker_ca_open_connections'), 0, m);
      assert.equal(metric(m, 'certbroker_ca_open_streams'), 0, m);
      assert.ok((metric(m, 'certbroker_ca_connections_closed_total{reason="limit"}') ?? 0) >= refused / 2, m);
      assert.ok((metric(m, 'certbroker_ca_connections_closed_total{reason="tls_handshake_timeout"}') ?? 0) >= RAW_TCP / 2, m);
      assert.ok((metric(m, 'certbroker_ca_connections_closed_total{reason="idle"}') ?? 0) > 0, m);
      assert.equal(metric(m, 'certbroker_ca_streams_refused_total{reason="body_timeout"}'), statuses.length, m);

      // And it still serves.
      const again = caClient(port, rootsPem);
      assert.equal((await again.create({ token, csr: await newCsr() })).code, undefined);
      again.close();
    } finally {
      for (const x of conns) x.destroy();
    }
    child.kill('SIGTERM');
    const code = await new Promise<number | null>((resolve) => (child!.exitCode !== null ? resolve(child!.exitCode) : child!.once('exit', (c) => resolve(c))));
    assert.equal(code, 0, log.lines.slice(-20).join('\n'));
  });
}
