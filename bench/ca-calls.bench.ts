/**
 * `npm run bench:ca-calls` — the CA's main-thread CPU per CreateCertificate, per thread, for two
 * builds in the same run (issue 15: the main thread's share M is what keeps the CA under the pool).
 *
 * Three measurements, each in a fresh child process per build, builds alternated within each round
 * (so both see the same machine):
 * - `pool`: pki's `LeafIssuerPool` (2 workers) alone, as bench:ca's in-process ceiling runs it: its
 *   main-thread share is the dispatch every path pays.
 * - `handler`: the CA's `CertificateService.createCertificate` called in process the way the
 *   transport calls it (a decoded request, header-backed metadata, the call's end as the transports pass it), with
 *   the real parts behind it — TokenReview cache, node authorizer over a synced pod informer of a
 *   real devcluster, the self-signed signer on 2 signing workers — and `CHANNELS x INFLIGHT` calls
 *   in flight. Everything on the main thread except HTTP/2 and TLS.
 * - `h2load`: the CA as `certbroker ca` runs it (TLS, default transport, 2 workers) under nghttp2's
 *   h2load, as `bench:ca` loads it.
 * Per-thread CPU comes from /proc/self/task/<tid>/schedstat (nanoseconds on CPU): the main thread
 * (tid = pid), the two busiest other threads (the signing workers) and the rest (V8/libuv helpers),
 * each divided by the certificates issued meanwhile. The workers' CPU per certificate is the same
 * work in every build and mode, so main / workers is the figure that survives the machine's speed
 * drifting between children (on a shared VM it moves by 2x within minutes).
 *
 * Usage: `node dist/bench/ca-calls.bench.js [--base <dist dir of another build>] [--rounds N]
 * [--seconds S] [--only pool|handler|h2load] [--prof <dir>]`. Without `--base` only this build is
 * measured. `--prof` writes a main-thread CPU profile of each child's measurement window there. The load average is
 * printed with every round; no number here is compared to a fixed threshold.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { Session } from 'node:inspector/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { median } from './report.js';
import { bearerMetadata, impersonatingRequest, startInProcessCa } from './in-process-ca.js';
import { h2loadMissing } from '../test/support/tools.js';

type CaModule = typeof import('../src/ca/index.js');
type CaEnvModule = typeof import('../test/ca/support/ca-env.js');
type PkiModule = typeof import('../src/pki/index.js');
type LogModule = typeof import('../src/core/log.js');
type GrpcModule = typeof import('../src/grpc/index.js');
type ClockModule = typeof import('../src/core/clock.js');

const OWN_DIST = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CHANNELS = 4;
const INFLIGHT = 32;
const IDENTITY = 'spiffe://cluster.local/ns/default/sa/sleep';

type Mode = 'pool' | 'handler' | 'h2load';

/** CPU nanoseconds per thread of this process so far. */
function threadCpu(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      out.set(Number(tid), Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]));
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return out;
}

/**
 * Runs `window` between two thread-CPU snapshots; with `--prof <dir>` also profiles the main
 * thread during it alone (not the start-up), written as <dir>/<mode>-<pid>.cpuprofile.
 */
async function measured(mode: Mode, window: () => Promise<number>): Promise<Split> {
  const dir = process.env.CA_CALLS_PROF;
  const session = dir ? new Session() : undefined;
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.start');
    if (process.env.CA_CALLS_HEAP) await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  }
  const before = threadCpu();
  const certs = await window();
  const after = threadCpu();
  if (session) {
    if (process.env.CA_CALLS_HEAP) {
      const heap = await session.post('HeapProfiler.stopSampling');
      writeFileSync(join(dir!, `${mode}-${process.pid}.heapprofile`), JSON.stringify(heap.profile));
    }
    const { profile } = await session.post('Profiler.stop');
    writeFileSync(join(dir!, `${mode}-${process.pid}.cpuprofile`), JSON.stringify(profile));
    session.disconnect();
  }
  return split(before, after, certs);
}

interface Split {
  readonly certs: number;
  readonly mainUs: number;
  readonly workersUs: number;
  readonly restUs: number;
}

/** Per-certificate CPU of the main thread, the two busiest others, and the rest, between two snapshots. */
function split(before: Map<number, number>, after: Map<number, number>, certs: number): Split {
  const deltas: number[] = [];
  let main = 0;
  for (const [tid, ns] of after) {
    const d = ns - (before.get(tid) ?? 0);
    if (tid === process.pid) main = d;
    else deltas.push(d);
  }
  deltas.sort((a, b) => b - a);
  const workers = (deltas[0] ?? 0) + (deltas[1] ?? 0);
  const rest = deltas.slice(2).reduce((a, b) => a + b, 0);
  const per = (ns: number) => ns / 1000 / Math.max(1, certs);
  return { certs, mainUs: per(main), workersUs: per(workers), restUs: per(rest) };
}

async function load(dist: string) {
  const at = (p: string) => pathToFileURL(join(dist, p)).href;
  return {
    ca: (await import(at('src/ca/index.js'))) as CaModule,
    env: (await import(at('test/ca/support/ca-env.js'))) as CaEnvModule,
    pki: (await import(at('src/pki/index.js'))) as PkiModule,
    log: (await import(at('src/core/log.js'))) as LogModule,
    grpc: (await import(at('src/grpc/index.js'))) as GrpcModule,
    clock: (await import(at('src/core/clock.js'))) as ClockModule,
  };
}

/** The child: one measurement of `mode` with the build at `dist`; prints one JSON Split. */
async function child(dist: string, mode: Mode, seconds: number): Promise<void> {
  const m = await load(dist);
  const env = await m.env.startCaEnv();
  try {
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-0', serviceAccount: 'ztunnel', node: 'node-a' });
    const token = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-0' });
    const csrs: string[] = [];
    for (let i = 0; i < 64; i++) csrs.push(m.pki.createCsr({ privateKey: (await m.pki.generateKeyPair()).privateKey, uri: 'spiffe://cluster.local/ns/x/sa/x' }).pem);
    const result =
      mode === 'pool' ? await poolRun(m, csrs, seconds) : mode === 'handler' ? await handlerRun(m, env, token, csrs, seconds) : await h2loadRun(m, env, token, csrs[0]!, seconds);
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await env.close();
  }
}

type Loaded = Awaited<ReturnType<typeof load>>;
type Env = Awaited<ReturnType<CaEnvModule['startCaEnv']>>;

/** `issue` in `CHANNELS x INFLIGHT` closed loops after a second of warm-up; the certificates issued in the window. */
async function closedLoops(issue: (seq: number) => Promise<unknown>, mode: Mode, seconds: number): Promise<Split> {
  let issued = 0;
  let failed = 0;
  let stop = false;
  let seq = 0;
  const loop = async () => {
    while (!stop) {
      try {
        await issue(seq++);
        issued++;
      } catch {
        failed++;
      }
    }
  };
  const loops = Array.from({ length: CHANNELS * INFLIGHT }, loop);
  await new Promise((r) => setTimeout(r, 1000));
  const result = await measured(mode, async () => {
    const n0 = issued;
    await new Promise((r) => setTimeout(r, seconds * 1000));
    return issued - n0;
  });
  stop = true;
  await Promise.all(loops);
  if (failed > 0) throw new Error(`${failed} calls failed`);
  return result;
}

/** The LeafIssuerPool alone (bench:ca's in-process ceiling). */
async function poolRun(m: Loaded, csrs: readonly string[], seconds: number): Promise<Split> {
  const root = await m.pki.createRootCa({ subject: 'O=cluster.local', ttlSeconds: 86_400 * 365 });
  const material = m.pki.caKeyMaterial({ cert: root.cert, keyObject: root.privateKey });
  const pool = new m.pki.LeafIssuerPool({ signer: material.leafSigner, size: 2 });
  try {
    return await closedLoops((i) => pool.issue({ csr: csrs[i % csrs.length]!, spiffeId: IDENTITY, ttlSeconds: 3600 }), 'pool', seconds);
  } finally {
    await pool.close();
  }
}

/** The service as ca-server.ts assembles it (in-process-ca.ts), called directly: `CHANNELS x INFLIGHT` closed loops. */
async function handlerRun(m: Loaded, env: Env, token: string, csrs: readonly string[], seconds: number): Promise<Split> {
  const ca = await startInProcessCa(m.ca, env.clusterConfig(), { clock: m.clock.systemClock, logger: m.log.silentLogger });
  ca.clusters.start();
  const index = ca.clusters.podIndex('Kubernetes')!;
  while (index.getPod({ namespace: 'istio-system', name: 'ztunnel-0' }) === undefined || index.getPod({ namespace: 'default', name: 'sleep-a' }) === undefined) await new Promise((r) => setTimeout(r, 20));
  const service = ca.service();
  const requests = csrs.map((csr) => impersonatingRequest(csr, IDENTITY));
  const metadata = bearerMetadata(token);
  // A call's end as that build's HTTP/2 transports hand it over: a CallAbort since stop 22, an AbortSignal before.
  const callEnd = 'LazyCallAbort' in m.ca ? () => new m.ca.LazyCallAbort() : () => new AbortController().signal;
  const result = await closedLoops((i) => service.createCertificate(requests[i % requests.length]!, metadata, callEnd()), 'handler', seconds);
  await ca.close();
  return result;
}

/** The CA as deployed under h2load; CPU over h2load's whole run divided by what the CA issued in it. */
async function h2loadRun(m: Loaded, env: Env, token: string, csr: string, seconds: number): Promise<Split> {
  const ca = await env.startCa({ signingWorkers: 2, logger: m.log.silentLogger });
  const index = ca.podIndex('Kubernetes')!;
  while (index.getPod({ namespace: 'istio-system', name: 'ztunnel-0' }) === undefined || index.getPod({ namespace: 'default', name: 'sleep-a' }) === undefined) await new Promise((r) => setTimeout(r, 20));
  const Req = m.grpc.protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateRequest');
  const body = Req.encode(Req.fromObject({ csr, validity_duration: 3600, metadata: { fields: { ImpersonatedIdentity: { stringValue: IDENTITY } } } })).finish();
  const dir = mkdtempSync(join(tmpdir(), 'ca-calls-'));
  const file = join(dir, 'frame.bin');
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  frame.set(body, 5);
  writeFileSync(file, frame);
  const issued = async () => (await ca.metrics.requests.get()).values.filter((v) => v.labels.outcome === 'issued').reduce((a, v) => a + v.value, 0);
  const h2 = (s: number) =>
    new Promise<void>((done, fail) => {
      const p = spawn('h2load', ['-c', String(CHANNELS), '-m', String(INFLIGHT), '-t', '1', '-D', String(s), '-d', file,
        '-H', 'content-type: application/grpc', '-H', 'te: trailers', '-H', `authorization: Bearer ${token}`,
        `https://127.0.0.1:${ca.port}/istio.v1.auth.IstioCertificateService/CreateCertificate`], { stdio: 'ignore' });
      p.on('error', fail);
      p.on('close', (code) => (code === 0 ? done() : fail(new Error(`h2load exited ${code}`))));
    });
  try {
    await h2(1);
    const n0 = await issued();
    return await measured('h2load', async () => {
      await h2(seconds);
      return (await issued()) - n0;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await ca.stop();
  }
}

function runChild(dist: string, mode: Mode, seconds: number, prof: string | undefined): Promise<Split> {
  return new Promise((done, fail) => {
    const args = [fileURLToPath(import.meta.url), '--child', dist, mode, String(seconds)];
    const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...(prof ? { CA_CALLS_PROF: resolve(prof) } : {}) } });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString()));
    p.on('close', (code) => (code === 0 ? done(JSON.parse(out.trim().split('\n').pop()!) as Split) : fail(new Error(`child ${mode} of ${dist} exited ${code}`))));
  });
}

function gitHead(dist: string): string {
  const r = spawnSync('git', ['-C', dist, 'log', '-1', '--format=%h'], { encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : '?';
}

async function main(argv: readonly string[]): Promise<void> {
  const opt = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const rounds = Number(opt('--rounds') ?? 3);
  const seconds = Number(opt('--seconds') ?? 3);
  const only = opt('--only') as Mode | undefined;
  const prof = opt('--prof');
  const base = opt('--base');
  const builds = [{ name: 'this', dist: OWN_DIST }, ...(base ? [{ name: 'base', dist: resolve(base) }] : [])];
  const h2loadProblem = h2loadMissing();
  if (h2loadProblem !== undefined) process.stdout.write(`${h2loadProblem}: the h2load measurement is skipped\n`);
  const modes = (only ? [only] : (['pool', 'handler', 'h2load'] as const)).filter((x) => x !== 'h2load' || h2loadProblem === undefined);
  process.stdout.write(`ca-calls: builds ${builds.map((b) => `${b.name}=${b.dist} (${gitHead(b.dist)})`).join(', ')}; ${rounds} rounds x ${seconds} s\n`);
  const results = new Map<string, Split[]>();
  for (let r = 0; r < rounds; r++) {
    for (const mode of modes) {
      const order = r % 2 === 0 ? builds : [...builds].reverse();
      for (const b of order) {
        const la = loadavg()[0]!.toFixed(2);
        const s = await runChild(b.dist, mode, seconds, prof);
        const key = `${mode} ${b.name}`;
        results.set(key, [...(results.get(key) ?? []), s]);
        process.stdout.write(
          `round ${r + 1} ${key}: main ${s.mainUs.toFixed(1)} µs/cert (main / workers ${(s.mainUs / s.workersUs).toFixed(3)}), workers ${s.workersUs.toFixed(1)}, rest ${s.restUs.toFixed(1)} (${s.certs} certs, load ${la})\n`,
        );
      }
    }
  }
  for (const [key, xs] of results) {
    const norm = xs.map((x) => x.mainUs / x.workersUs);
    process.stdout.write(`median ${key}: main / workers ${median(norm).toFixed(3)} (${norm.map((x) => x.toFixed(3)).join(', ')}); main ${median(xs.map((x) => x.mainUs)).toFixed(1)} µs/cert (${xs.map((x) => x.mainUs.toFixed(1)).join(', ')}), workers ${median(xs.map((x) => x.workersUs)).toFixed(1)}, rest ${median(xs.map((x) => x.restUs)).toFixed(1)}\n`);
  }
}

const argv = process.argv.slice(2);
const run = argv[0] === '--child' ? child(argv[1]!, argv[2] as Mode, Number(argv[3])) : main(argv);
run.catch((err: unknown) => {
  process.stderr.write(`bench:ca-calls failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
