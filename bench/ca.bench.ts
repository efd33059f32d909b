/**
 * `npm run bench:ca` — certificates per second.
 *
 * In-process ceiling (the signing core alone: CSR parse + verify + leaf build + sign + PEM):
 * one thread (pki FastLeafIssuer) and the CA's worker pool (pki LeafIssuerPool, one worker per
 * core). Full path: a real CA (self-signed root in a real devcluster, as deployed: TLS, default
 * transport and workers) serving CreateCertificate over gRPC+TLS to a separate load process
 * (ztunnel tokens impersonating a workload, so TokenReview is cached after the first call and
 * the node authorizer runs on every call).
 *
 * The headline is measured in BENCH_CA_ROUNDS (default 5) rounds, each the pool, the default CA (h2 engine) and the node:http2 CA in
 * BENCH_CA_SLICES (default 4) interleaved slices per side, in mirrored order (ABC CBA ...), each side's slices summed,
 * and reported as the median per-round ratio; comparison rows (other transports,
 * load clients, signing on the main thread) are one run each. The load generator is nghttp2's
 * h2load when it is on PATH (Debian: nghttp2-client; it barely uses the shared cores), else our
 * node:http2 client. Results go to the CA section of docs/benchmarks.md.
 *
 * BENCH_CA_SECONDS (default 4) per measurement (per side and round, over its slices); BENCH_CA_CHANNELS (default 4) connections and
 * BENCH_CA_INFLIGHT (default 32) calls in flight on each; BENCH_CA_DOCS overrides the file
 * written; BENCH_CA_ONLY=<h2load|http2|grpc-js> keeps only the comparison rows with that load client.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, Metadata, type ChannelCredentials, type Client, type ServiceError } from '@grpc/grpc-js';
import { median, writeDocSection } from './report.js';
import { h2loadMissing } from '../test/support/tools.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SECONDS = Number(process.env.BENCH_CA_SECONDS ?? 4);
const CHANNELS = Number(process.env.BENCH_CA_CHANNELS ?? 4);
const INFLIGHT = Number(process.env.BENCH_CA_INFLIGHT ?? 32);
const ROUNDS = Math.max(1, Number(process.env.BENCH_CA_ROUNDS ?? 5));
/** Slices per side in each round (BENCH_CA_SLICES), SECONDS / SLICES long each. */
const SLICES = Math.max(1, Number(process.env.BENCH_CA_SLICES ?? 4));
/** h2load's warm-up before each slice (connections up, the pipeline full), not counted. */
const SLICE_WARMUP_SECONDS = 0.5;
const CSR_COUNT = 256;
const IDENTITY = 'spiffe://cluster.local/ns/default/sa/sleep';

interface ClientJob {
  readonly port: number;
  readonly rootsPem: string;
  readonly tokens: readonly string[];
  readonly csrs: readonly string[];
  readonly impersonate: string;
  readonly channels: number;
  readonly inflight: number;
  readonly warmupMs: number;
  readonly measureMs: number;
  readonly client: 'http2' | 'grpc-js' | 'h2load';
}

interface ClientResult {
  /** CPU seconds the load process used during the window (user + system). */
  readonly cpuSeconds: number;
  readonly count: number;
  readonly errors: number;
  readonly seconds: number;
  readonly firstError?: string;
}

type CreateCertificate = (req: unknown, md: Metadata, cb: (err: ServiceError | null, res?: { cert_chain: string[] }) => void) => void;

/** Counts outcomes, but only those that finish inside the measurement window. */
interface Tally {
  readonly measuring: boolean;
  ok(): void;
  fail(reason: string): void;
}

/**
 * The closed loop both load clients share: `job.inflight` loops per channel, each issuing `call`
 * back to back; after `job.warmupMs` it counts outcomes and this process's CPU for `job.measureMs`
 * (printing window-start/window-end for the parent), then stops the loops and waits for them.
 */
async function closedLoop(job: ClientJob, call: (channel: number, seq: number, tally: Tally) => Promise<void>): Promise<ClientResult> {
  let stop = false;
  let seq = 0;
  let count = 0;
  let errors = 0;
  let firstError: string | undefined;
  const tally = {
    measuring: false,
    ok() {
      if (tally.measuring) count++;
    },
    fail(reason: string) {
      if (!tally.measuring) return;
      errors++;
      firstError ??= reason;
    },
  };
  const loop = async (c: number) => {
    while (!stop) await call(c, seq++, tally);
  };
  const loops: Promise<void>[] = [];
  for (let c = 0; c < job.channels; c++) for (let k = 0; k < job.inflight; k++) loops.push(loop(c));
  await new Promise((r) => setTimeout(r, job.warmupMs));
  tally.measuring = true;
  process.stdout.write('window-start\n');
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, job.measureMs));
  tally.measuring = false;
  process.stdout.write('window-end\n');
  const cpu = process.cpuUsage(cpu0);
  const seconds = (performance.now() - t0) / 1000;
  stop = true;
  await Promise.all(loops);
  return { cpuSeconds: (cpu.user + cpu.system) / 1e6, count, errors, seconds, ...(firstError ? { firstError } : {}) };
}

/**
 * The light load generator: node:http2 over TLS speaking gRPC framing directly, with every
 * request pre-encoded by protobufjs from our .proto. It is a real gRPC client on the wire (the
 * server cannot tell it from grpc-js), but spends far less CPU per call than grpc-js, which
 * matters when it shares 2 cores with the CA.
 */
async function runHttp2Client(job: ClientJob): Promise<ClientResult> {
  const { protobufRoot } = await import('../src/grpc/index.js');
  const { requestFrame, rawCaSession } = await import('../test/ca/support/raw-grpc.js');
  const Res = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateResponse');
  const frames = job.csrs.map((csr) =>
    requestFrame({ csr, validity_duration: 3600, metadata: { fields: { ImpersonatedIdentity: { stringValue: job.impersonate } } } }),
  );
  const sessions = Array.from({ length: job.channels }, () => rawCaSession({ port: job.port, rootsPem: () => job.rootsPem }, { servername: 'localhost' }));
  let checked = 0;
  const result = await closedLoop(job, async (c, i, tally) => {
    const r = await sessions[c]!.call({ authorization: `Bearer ${job.tokens[i % job.tokens.length]}` }, frames[i % frames.length]);
    if (!tally.measuring) return;
    if (r.grpc === 0) {
      tally.ok();
      if (checked < 3) {
        // Spot-check that a real chain came back (decode a few responses fully).
        checked++;
        const res = Res.decode(r.body.subarray(5)) as unknown as { cert_chain: string[] };
        if (res.cert_chain.length < 2 || !res.cert_chain[0]!.startsWith('-----BEGIN CERTIFICATE-----')) tally.fail('malformed response');
      }
    } else {
      tally.fail(`grpc-status ${r.grpc} ${decodeURIComponent(r.metadata['grpc-message'] ?? '')}`);
    }
  });
  for (const s of sessions) s.close();
  return result;
}

/** The load process: runs the job from the file in argv[3], prints one JSON result line. */
async function runClient(jobFile: string): Promise<void> {
  const job = JSON.parse(readFileSync(jobFile, 'utf8')) as ClientJob;
  if (job.client === 'http2') {
    process.stdout.write(JSON.stringify(await runHttp2Client(job)) + '\n');
    return;
  }
  const { loadProtos, lookup, stringStruct } = await import('../src/grpc/index.js');
  const { grpcObject } = loadProtos(['istio/v1/auth/ca.proto']);
  const Ctor = lookup<new (a: string, c: ChannelCredentials, o: Record<string, string | number>) => Client & { CreateCertificate: CreateCertificate }>(
    grpcObject,
    'istio.v1.auth.IstioCertificateService',
  );
  const creds = credentials.createSsl(Buffer.from(job.rootsPem));
  const clients = Array.from({ length: job.channels }, (_, i) =>
    new Ctor(`127.0.0.1:${job.port}`, creds, { 'grpc.ssl_target_name_override': 'localhost', 'grpc.use_local_subchannel_pool': 1, 'bench.channel': i }),
  );
  const metadata = job.tokens.map((t) => {
    const md = new Metadata();
    md.set('authorization', `Bearer ${t}`);
    return md;
  });
  const meta = stringStruct({ ImpersonatedIdentity: job.impersonate });
  const result = await closedLoop(
    job,
    (c, i, tally) =>
      new Promise((resolve) => {
        clients[c]!.CreateCertificate(
          { csr: job.csrs[i % job.csrs.length], validity_duration: 3600, metadata: meta },
          metadata[i % metadata.length]!,
          (err) => {
            if (err) tally.fail(`${err.code} ${err.details}`);
            else tally.ok();
            resolve();
          },
        );
      }),
  );
  for (const c of clients) c.close();
  process.stdout.write(JSON.stringify(result) + '\n');
}

interface Window {
  /** CA process CPU seconds and main-thread event-loop utilization during the load's measurement window. */
  cpuSeconds: number;
  elu: number;
  /** The window's length as this process saw it (between the two marks), 0 until it ended. */
  seconds: number;
}

/**
 * Runs a load process to completion and returns its stdout. While it runs, samples this (the
 * CA's) process CPU and main-thread busy time into `window` between the first stdout line
 * containing `marks.start` and the first containing `marks.end`.
 */
function runSampled(command: string, args: readonly string[], marks: { readonly start: string; readonly end: string }, window: Window): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    let cpu0: NodeJS.CpuUsage | undefined;
    let elu0: ReturnType<typeof performance.eventLoopUtilization> | undefined;
    let t0 = 0;
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      if (cpu0 === undefined && out.includes(marks.start)) {
        cpu0 = process.cpuUsage();
        elu0 = performance.eventLoopUtilization();
        t0 = performance.now();
      }
      if (cpu0 !== undefined && window.cpuSeconds === 0 && out.includes(marks.end)) {
        const d = process.cpuUsage(cpu0);
        window.cpuSeconds = (d.user + d.system) / 1e6;
        window.elu = performance.eventLoopUtilization(elu0).utilization;
        window.seconds = (performance.now() - t0) / 1000;
      }
    });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} exited with ${code}: ${out.slice(-500)}`))));
  });
}

/** Runs our load process (node:http2 or grpc-js client) with `job`. */
async function runLoad(job: ClientJob, dir: string, window: Window): Promise<ClientResult> {
  const file = join(dir, `job-${Date.now()}.json`);
  writeFileSync(file, JSON.stringify(job));
  const out = await runSampled(process.execPath, [fileURLToPath(import.meta.url), '--client', file], { start: 'window-start\n', end: 'window-end\n' }, window);
  return JSON.parse(out.trim().split('\n').pop()!) as ClientResult;
}


interface H2loadJob {
  readonly port: number;
  readonly token: string;
  /** One pre-encoded gRPC request frame (h2load sends one body). */
  readonly frame: Buffer;
  readonly channels: number;
  readonly inflight: number;
  readonly warmupSeconds: number;
  readonly seconds: number;
}

/**
 * nghttp2's h2load as the load generator: C, event-driven, one thread, so nearly all of the 2
 * cores are left to the CA. It speaks HTTP/2 over TLS 1.3 but knows nothing of gRPC: it counts
 * HTTP 200 as success, and a gRPC error is an HTTP 200 with a non-zero grpc-status trailer.
 * So the CA's own request counter is read before and after the run: every call the CA saw must
 * have ended `issued`, and it must have issued at least what h2load counted; anything else is
 * reported as errors. CPU of the load process comes from the shell's `times` (children's user
 * + system) over the whole run, divided by every call the CA issued during it.
 */
async function runH2load(job: H2loadJob, dir: string, window: Window, issuedByOutcome: () => Promise<Map<string, number>>): Promise<ClientResult> {
  const body = join(dir, `frame-${Date.now()}.bin`);
  writeFileSync(body, job.frame);
  const args = [
    '-c', String(job.channels), '-m', String(job.inflight), '-t', '1',
    '-D', `${Math.round(job.seconds * 1000)}ms`, `--warm-up-time=${Math.round(job.warmupSeconds * 1000)}ms`,
    '-d', body,
    '-H', 'content-type: application/grpc', '-H', 'te: trailers', '-H', `authorization: Bearer ${job.token}`,
    `https://127.0.0.1:${job.port}/istio.v1.auth.IstioCertificateService/CreateCertificate`,
  ];
  const before = await issuedByOutcome();
  // `times` after h2load: the second line is the children's (h2load's) user and system time.
  const out = await runSampled('sh', ['-c', 'h2load "$@"; status=$?; times; exit $status', 'sh', ...args], {
    start: 'Main benchmark duration is started',
    end: 'Main benchmark duration is over',
  }, window);
  const after = await issuedByOutcome();
  const m = /requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/u.exec(out);
  const t = /(\d+)m([\d.]+)s (\d+)m([\d.]+)s\s*$/u.exec(out.trim());
  if (!m || !t) throw new Error(`cannot read h2load's output: ${out.slice(-500)}`);
  const succeeded = Number(m[3]);
  const h2Errors = Number(m[4]) + Number(m[5]) + Number(m[6]);
  let caIssued = 0;
  let caOther = 0;
  let firstError: string | undefined;
  for (const [outcome, n] of after) {
    const d = n - (before.get(outcome) ?? 0);
    if (outcome === 'issued') caIssued = d;
    else if (d > 0) {
      caOther += d;
      firstError ??= `CA counted ${d} calls ending ${outcome}`;
    }
  }
  if (caIssued < succeeded) firstError ??= `h2load counted ${succeeded} successes, the CA issued only ${caIssued}`;
  if (h2Errors > 0) firstError ??= `h2load: ${m[4]} failed, ${m[5]} errored, ${m[6]} timeout`;
  const loadCpu = Number(t[1]) * 60 + Number(t[2]) + Number(t[3]) * 60 + Number(t[4]);
  // h2load's CPU covers warm-up + window: scale it to the window by calls.
  const cpuSeconds = caIssued > 0 ? (loadCpu * succeeded) / caIssued : loadCpu;
  const errors = h2Errors + caOther + Math.max(0, succeeded - caIssued);
  // The window as this process saw h2load's marks (its own timer may fire a little late under load).
  return { cpuSeconds, count: succeeded, errors, seconds: window.seconds > 0 ? window.seconds : job.seconds, ...(firstError ? { firstError } : {}) };
}

/** A measured rate and the CPU it took (whole process, all threads). */
interface Measured {
  readonly rate: number;
  readonly cpuUs: number;
}

type Material = ReturnType<typeof import('../src/pki/index.js').caKeyMaterial>;

/** The signing core on one thread (FastLeafIssuer.issueAsync, as the pool workers run it). */
async function measureSingle(material: Material, csrs: readonly string[]): Promise<Measured> {
  const pki = await import('../src/pki/index.js');
  const fast = new pki.FastLeafIssuer({ signer: material.leafSigner });
  const issueOne = (i: number) => fast.issueAsync({ csr: csrs[i % csrs.length]!, spiffeId: IDENTITY, ttlSeconds: 3600 });
  for (let i = 0; i < 200; i++) await issueOne(i);
  let n = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + SECONDS * 1000;
  while (performance.now() < end) await issueOne(n++);
  const rate = n / ((performance.now() - t0) / 1000);
  const c = process.cpuUsage(c0);
  return { rate, cpuUs: (c.user + c.system) / n };
}

/**
 * The in-process ceiling: the CA's LeafIssuerPool on every core, one for the whole run and warmed
 * like the CA before the rounds (its slices measured with `measurePoolSlice`). Until stop 25 each
 * round started a pool of its own: its first slice then ran on cold workers (JIT, young
 * generation) at 15-20 % under the round's other slices, which put every round's pool rate a few
 * per cent low and the CA's ratio as much high.
 */
function startPool(pki: typeof import('../src/pki/index.js'), material: Material, size: number): InstanceType<typeof pki.LeafIssuerPool> {
  return new pki.LeafIssuerPool({ signer: material.leafSigner, size });
}

type Pool = ReturnType<typeof startPool>;

/** What one slice of a measurement counted: certificates, its length and the CPU it took. */
interface Slice {
  readonly count: number;
  readonly seconds: number;
  readonly cpuSeconds: number;
}

/**
 * One slice of the pool: `warmup` requests first (they also let the CA's last answers of the
 * slice before drain), then `CHANNELS x INFLIGHT` closed loops for `seconds`, as many requests in
 * flight as the load keeps.
 */
async function measurePoolSlice(pool: Pool, csrs: readonly string[], seconds: number, warmup: number): Promise<Slice> {
  let seq = 0;
  const issue = () => pool.issue({ csr: csrs[seq++ % csrs.length]!, spiffeId: IDENTITY, ttlSeconds: 3600 });
  await Promise.all(Array.from({ length: warmup }, issue));
  let k = 0;
  const c1 = process.cpuUsage();
  const t1 = performance.now();
  const end1 = t1 + seconds * 1000;
  const loop = async () => {
    while (performance.now() < end1) {
      await issue();
      k++;
    }
  };
  await Promise.all(Array.from({ length: CHANNELS * INFLIGHT }, loop));
  const c = process.cpuUsage(c1);
  return { count: k, seconds: (performance.now() - t1) / 1000, cpuSeconds: (c.user + c.system) / 1e6 };
}

/** Slices summed: certificates over the summed time, CPU over the summed certificates. */
function measuredOf(slices: readonly Slice[]): Measured {
  const count = slices.reduce((a, x) => a + x.count, 0);
  const seconds = slices.reduce((a, x) => a + x.seconds, 0);
  const cpu = slices.reduce((a, x) => a + x.cpuSeconds, 0);
  return { rate: count / seconds, cpuUs: (cpu * 1e6) / Math.max(1, count) };
}

type LoadClient = 'h2load' | 'http2' | 'grpc-js';

/** What one load run (or one slice of it) counted against a CA. */
interface LoadSlice {
  readonly count: number;
  readonly seconds: number;
  readonly errors: number;
  readonly caCpuSeconds: number;
  readonly loadCpuSeconds: number;
  /** Seconds the CA's main thread was busy (event-loop utilization x seconds). */
  readonly busySeconds: number;
}

interface Row {
  readonly name: string;
  readonly rate: number;
  readonly errors: number;
  readonly elu: number;
  readonly caCpuUs: number;
  readonly loadCpuUs: number;
  readonly caCores: number;
  readonly loadCores: number;
}

/** A row from load slices summed (certificates over the summed time, CPU over the summed certificates). */
function rowOf(name: string, slices: readonly LoadSlice[]): Row {
  const sum = (f: (x: LoadSlice) => number) => slices.reduce((a, x) => a + f(x), 0);
  const count = sum((x) => x.count);
  const seconds = sum((x) => x.seconds);
  const n = Math.max(1, count);
  return {
    name,
    rate: count / seconds,
    errors: sum((x) => x.errors),
    elu: sum((x) => x.busySeconds) / seconds,
    caCpuUs: (sum((x) => x.caCpuSeconds) * 1e6) / n,
    loadCpuUs: (sum((x) => x.loadCpuSeconds) * 1e6) / n,
    caCores: sum((x) => x.caCpuSeconds) / seconds,
    loadCores: sum((x) => x.loadCpuSeconds) / seconds,
  };
}

function printed(row: Row): Row {
  process.stdout.write(
    `${row.name}: ${row.rate.toFixed(0)}/s (errors ${row.errors}; CA ${row.caCpuUs.toFixed(0)} µs CPU/cert, main thread busy ${(row.elu * 100).toFixed(0)} %; load ${row.loadCpuUs.toFixed(0)} µs/cert)\n`,
  );
  return row;
}

async function main(): Promise<void> {
  const pki = await import('../src/pki/index.js');
  const { silentLogger } = await import('../src/core/log.js');
  const { protobufRoot } = await import('../src/grpc/index.js');
  const { startCaEnv, waitForIndex } = await import('../test/ca/support/ca-env.js');
  const dir = mkdtempSync(join(tmpdir(), 'bench-ca-'));
  const csrs: string[] = [];
  for (let i = 0; i < CSR_COUNT; i++) {
    const { privateKey } = await pki.generateKeyPair();
    csrs.push(pki.createCsr({ privateKey, uri: 'spiffe://cluster.local/ns/ignored/sa/ignored' }).pem);
  }
  const poolSize = availableParallelism();
  const loadStart = loadavg().map((x) => x.toFixed(2)).join(' / ');
  const h2loadProblem = h2loadMissing();
  const h2load = h2loadProblem === undefined;
  const headlineClient: LoadClient = h2load ? 'h2load' : 'http2';
  process.stdout.write(`bench:ca — ${SECONDS}s per measurement, ${ROUNDS} paired rounds, ${CHANNELS} connections x ${INFLIGHT} in flight, ${cpus().length} cores\n`);
  if (!h2load) process.stdout.write(`${h2loadProblem}: the headline uses the node:http2 load client, and the h2load rows are skipped\n`);

  const root = await pki.createRootCa({ subject: 'O=cluster.local', ttlSeconds: 10 * 365 * 86_400 });
  const material = pki.caKeyMaterial({ cert: root.cert, keyObject: root.privateKey });
  const single = await measureSingle(material, csrs);
  process.stdout.write(`in-process, 1 thread: ${single.rate.toFixed(0)}/s (${single.cpuUs.toFixed(0)} µs CPU/cert)\n`);

  const Req = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateRequest');
  const body = Req.encode(
    Req.fromObject({ csr: csrs[0], validity_duration: 3600, metadata: { fields: { ImpersonatedIdentity: { stringValue: IDENTITY } } } }),
  ).finish();
  const h2loadFrame = Buffer.alloc(5 + body.length);
  h2loadFrame.writeUInt32BE(body.length, 1);
  h2loadFrame.set(body, 5);

  const env = await startCaEnv();
  const pairs: Array<{ pool: Measured; path: Row; http2: Row; slicesPool: number[]; slicesPath: number[] }> = [];
  const rows: Row[] = [];
  try {
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    const tokens: string[] = [];
    for (let i = 0; i < 4; i++) {
      await env.createPod({ namespace: 'istio-system', name: `ztunnel-${i}`, serviceAccount: 'ztunnel', node: 'node-a' });
      tokens.push(await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: `ztunnel-${i}` }));
    }
    type CaUnderTest = Awaited<ReturnType<typeof env.startCa>>;
    const start = async (o: { transport?: 'grpc-js' | 'http2' | 'h2'; workers: number }): Promise<CaUnderTest> => {
      const ca = await env.startCa({ signingWorkers: o.workers, ...(o.transport ? { transport: o.transport } : {}), logger: silentLogger });
      await waitForIndex(ca, (i) => i.getPod({ namespace: 'istio-system', name: 'ztunnel-3' }) !== undefined && i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
      return ca;
    };
    /** One load run against `ca` (a whole measurement or one slice of it). */
    const load = async (ca: CaUnderTest, client: LoadClient, seconds: number, warmupSeconds: number): Promise<LoadSlice> => {
      const win: Window = { cpuSeconds: 0, elu: 0, seconds: 0 };
      const byOutcome = async () => {
        const m = new Map<string, number>();
        for (const v of (await ca.metrics.requests.get()).values) m.set(String(v.labels.outcome), (m.get(String(v.labels.outcome)) ?? 0) + v.value);
        return m;
      };
      const res =
        client === 'h2load'
          ? await runH2load({ port: ca.port, token: tokens[0]!, frame: h2loadFrame, channels: CHANNELS, inflight: INFLIGHT, warmupSeconds, seconds }, dir, win, byOutcome)
          : await runLoad(
              { port: ca.port, rootsPem: ca.rootsPem(), tokens, csrs, impersonate: IDENTITY, channels: CHANNELS, inflight: INFLIGHT, warmupMs: warmupSeconds * 1000, measureMs: seconds * 1000, client },
              dir,
              win,
            );
      if (res.firstError) process.stdout.write(`  first error: ${res.firstError}\n`);
      return { count: res.count, seconds: res.seconds, errors: res.errors, caCpuSeconds: win.cpuSeconds, loadCpuSeconds: res.cpuSeconds, busySeconds: win.elu * res.seconds };
    };
    /** One whole load run against `ca`; prints and returns the row. */
    const run = async (ca: CaUnderTest, name: string, client: LoadClient, seconds = SECONDS, warmupSeconds = 1): Promise<Row> => printed(rowOf(name, [await load(ca, client, seconds, warmupSeconds)]));

    // The headline: the CA as deployed (default transport and workers), measured in rounds that
    // pair the in-process pool with the full path in the same period, so both see the same machine.
    const headline = await start({ workers: poolSize });
    await run(headline, 'warm-up (not reported)', headlineClient, 2, 1);
    // The same CA on node:http2 (CA_TRANSPORT=http2, the default before stop 21), measured in the same rounds.
    const nodeHttp2Ca = await start({ transport: 'http2', workers: poolSize });
    await run(nodeHttp2Ca, 'warm-up http2 (not reported)', headlineClient, 2, 1);
    const hits0 = (await headline.metrics.tokenReviewCache.get()).values.find((v) => v.labels.result === 'miss')?.value ?? 0;
    // Each round: SLICES short slices per side, interleaved pool, CA, node:http2 CA then the
    // mirror order (ABC CBA ...), each side's slices summed. Every side's slices then sit at the
    // same mean time in the round, so a machine that speeds up or slows down steadily during it
    // favours no side, and faster swings are spread over the sides instead of landing on one.
    const slice = SECONDS / SLICES;
    // The pool's warm-up: as long as the CA's (2 s, after its own warm-up requests), not reported.
    const pool = startPool(pki, material, poolSize);
    await measurePoolSlice(pool, csrs, 2, 400);
    for (let r = 0; r < ROUNDS; r++) {
      const sides = { pool: [] as Slice[], path: [] as LoadSlice[], http2: [] as LoadSlice[] };
      const steps: Record<keyof typeof sides, () => Promise<void>> = {
        pool: async () => void sides.pool.push(await measurePoolSlice(pool, csrs, slice, 200)),
        path: async () => void sides.path.push(await load(headline, headlineClient, slice, SLICE_WARMUP_SECONDS)),
        http2: async () => void sides.http2.push(await load(nodeHttp2Ca, headlineClient, slice, SLICE_WARMUP_SECONDS)),
      };
      for (let j = 0; j < SLICES; j++) {
        const order = (['pool', 'path', 'http2'] as const).slice();
        if ((r + j) % 2 === 1) order.reverse();
        for (const side of order) await steps[side]();
      }
      const m = measuredOf(sides.pool);
      process.stdout.write(`round ${r + 1}: in-process pool ${m.rate.toFixed(0)}/s (${m.cpuUs.toFixed(0)} µs CPU/cert; slices ${sides.pool.map((x) => (x.count / x.seconds).toFixed(0)).join(', ')}/s)\n`);
      pairs.push({
        pool: m,
        path: printed(rowOf(`round ${r + 1}: default CA, ${headlineClient} load`, sides.path)),
        http2: printed(rowOf(`round ${r + 1}: http2 (node:http2) transport CA, ${headlineClient} load`, sides.http2)),
        slicesPool: sides.pool.map((x) => x.count / x.seconds),
        slicesPath: sides.path.map((x) => x.count / x.seconds),
      });
    }
    await pool.close();
    await nodeHttp2Ca.stop();
    const reviews = ((await headline.metrics.tokenReviewCache.get()).values.find((v) => v.labels.result === 'miss')?.value ?? 0) - hits0;
    process.stdout.write(`TokenReviews sent during the rounds: ${reviews} (cached after the first call per token)\n`);
    await headline.stop();

    // Comparisons, one run each, against the median pool rate.
    type Scenario = { workers: number; client: LoadClient; transport: 'grpc-js' | 'http2' | 'h2' };
    const workersLabel = (w: number) => (w > 0 ? `signing on ${w} worker${w > 1 ? 's' : ''}` : 'signing on the main thread');
    const scenarios: Scenario[] = [
      ...(h2load ? [{ transport: 'grpc-js', workers: poolSize, client: 'h2load' } as const] : []),
      { transport: 'http2', workers: poolSize, client: 'http2' },
      { transport: 'h2', workers: poolSize, client: 'http2' },
      { transport: 'grpc-js', workers: poolSize, client: 'http2' },
      { transport: 'grpc-js', workers: poolSize, client: 'grpc-js' },
      ...(h2load ? [{ transport: 'http2', workers: 0, client: 'h2load' } as const] : []),
    ];
    for (const sc of process.env.BENCH_CA_ONLY ? scenarios.filter((x) => x.client === process.env.BENCH_CA_ONLY) : scenarios) {
      const ca = await start({ transport: sc.transport, workers: sc.workers });
      rows.push(await run(ca, `${sc.transport} transport, ${sc.client} load, ${workersLabel(sc.workers)}`, sc.client));
      await ca.stop();
    }
  } finally {
    await env.close();
    rmSync(dir, { recursive: true, force: true });
  }

  const poolRate = median(pairs.map((p) => p.pool.rate));
  const poolCpu = median(pairs.map((p) => p.pool.cpuUs));
  const ratios = pairs.map((p) => p.path.rate / p.pool.rate);
  const cpuRatios = pairs.map((p) => p.pool.cpuUs / (p.path.caCpuUs + p.path.loadCpuUs));
  const http2Ratios = pairs.map((p) => p.http2.rate / p.pool.rate);
  const http2CpuRatios = pairs.map((p) => p.pool.cpuUs / (p.http2.caCpuUs + p.http2.loadCpuUs));
  const fmt = (n: number) => n.toFixed(0);
  const spread = (xs: readonly number[]) => (xs.length > 1 ? `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}` : fmt(xs[0]!));
  const range = (xs: readonly number[]) => `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
  const rowLine = (r: Row, ratio: string, cpuRatio: string) =>
    `| ${r.name} | ${fmt(r.rate)} | ${ratio} | ${fmt(r.caCpuUs)} + ${fmt(r.loadCpuUs)} | ${cpuRatio} | ${(r.elu * 100).toFixed(0)} % | ${r.caCores.toFixed(2)} / ${r.loadCores.toFixed(2)} |`;
  const lines = [
    `**Full gRPC+TLS path / in-process pool: median ${range(ratios)} over ${ROUNDS} paired rounds** (CPU-based: ${range(cpuRatios)}; issue 15's goal: ≥ 0.80 in every round). The same CA on node:http2 (\`CA_TRANSPORT=http2\`), same rounds: median ${range(http2Ratios)} (CPU-based: ${range(http2CpuRatios)}).`,
    '',
    `| path | certs/s | / in-process pool | CPU µs per cert (CA + load) | in-process pool CPU / this CPU | CA main thread busy | cores used: CA / load |`,
    `|---|---:|---:|---:|---:|---:|---:|`,
    `| in-process, 1 thread (FastLeafIssuer) | ${fmt(single.rate)} | ${(single.rate / poolRate).toFixed(2)} | ${fmt(single.cpuUs)} | ${(poolCpu / single.cpuUs).toFixed(2)} | | |`,
    ...pairs.flatMap((p, i) => [
      `| round ${i + 1}: in-process, pool of ${poolSize} workers (LeafIssuerPool; slices ${spread(p.slicesPool)}/s, CA's ${spread(p.slicesPath)}/s) | ${fmt(p.pool.rate)} | 1.00 | ${fmt(p.pool.cpuUs)} | 1.00 | | ${((p.pool.rate * p.pool.cpuUs) / 1e6).toFixed(2)} / — |`,
      rowLine({ ...p.path, name: `round ${i + 1}: **default CA** (${headlineClient} load)` }, `**${ratios[i]!.toFixed(2)}**`, `${cpuRatios[i]!.toFixed(2)} (CA alone ${(p.pool.cpuUs / p.path.caCpuUs).toFixed(2)})`),
      rowLine({ ...p.http2, name: `round ${i + 1}: **http2 (node:http2) CA** (${headlineClient} load)` }, `**${http2Ratios[i]!.toFixed(2)}**`, `${http2CpuRatios[i]!.toFixed(2)} (CA alone ${(p.pool.cpuUs / p.http2.caCpuUs).toFixed(2)})`),
    ]),
    ...rows.map((r) => rowLine(r, `${(r.rate / poolRate).toFixed(2)}`, `${(poolCpu / (r.caCpuUs + r.loadCpuUs)).toFixed(2)} (CA alone ${(poolCpu / r.caCpuUs).toFixed(2)})`)),
  ];
  const note = [
    `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}, ${cpus().length} cores, Node ${process.version}, load average ${loadStart} at the start and ${loadavg().map((x) => x.toFixed(2)).join(' / ')} at the end (1 / 5 / 15 min); per round and side ${SECONDS} s measured, in ${SLICES} slices of ${(SECONDS / SLICES).toFixed(2)} s (h2load: ${SLICE_WARMUP_SECONDS} s warm-up before each); comparison rows ${SECONDS} s after a 1 s warm-up (one unreported warm-up run first).`,
    `In-process = CSR parse + verify + leaf build + P-256 sign + PEM on the LeafIssuerPool (${poolSize} workers, ${CHANNELS * INFLIGHT} requests in flight, ${CSR_COUNT} distinct CSRs round-robin); "1 thread" = FastLeafIssuer alone.`,
    `Default CA = \`certbroker ca\` as deployed: TLS, the h2 transport (certbroker's own HTTP/2 engine, src/h2), ${poolSize} signing workers, self-signed root in a devcluster, ztunnel tokens impersonating a workload (TokenReview cached after the first call per token, node authorizer on every call). Each round measures the pool, the default CA and the same CA on node:http2 (\`CA_TRANSPORT=http2\`) in ${SLICES} interleaved slices each, in mirrored order (pool, CA, node:http2 CA, then node:http2 CA, CA, pool, ...), each side's slices summed, so all three sides sample the same stretch of the machine's time; the comparison rows below the rounds are one run each, divided by the median pool rate.`,
    `Load: ${CHANNELS} TLS connections x ${INFLIGHT} calls in flight from a separate process. "h2load" = nghttp2's h2load (C; one CSR and one token; h2load counts HTTP 200s, so the CA's own outcome counter must show every call issued — any other outcome is counted as an error); "http2" = node:http2 with pre-encoded gRPC frames (every grpc-status checked, a few responses decoded); "grpc-js" = grpc-js clients.`,
    `The load process and the CA share the same ${cpus().length} cores and the machine is shared with other work: rates move with its load, which is why the ratio is taken per round; the CPU-per-certificate columns (process CPU / certificates) are the contention-robust comparison. A pool row's "cores used" is the pool's process CPU over its time: when it and the CA's differ much from each other (and from ${cpus().length}), other work took cores from one side more than the other, and that round's rate ratio says more about the machine than about the CA.`,
    `Reference from the issue: Go crypto/x509 on this machine ~4,900/s per core (~9,300/s on 2 cores).`,
  ];
  writeDocSection({ root: ROOT, marker: 'ca', heading: 'CA (`npm run bench:ca`)', body: [...lines, '', ...note].join('\n'), file: process.env.BENCH_CA_DOCS });
  process.stdout.write(lines.join('\n') + '\n');
}

if (process.argv[2] === '--client') {
  runClient(process.argv[3]!).catch((err: unknown) => {
    process.stderr.write(`bench:ca client failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
} else {
  main().catch((err: unknown) => {
    process.stderr.write(`bench:ca failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  });
}
