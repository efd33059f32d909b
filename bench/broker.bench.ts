/**
 * `npm run bench:broker` — the node broker.
 *
 * 1. Cold start of a node with 500 pods across 200 service accounts: a real devcluster and the
 *    real CA over TLS in this process (1 signing worker), the broker started against them; time
 *    until all 200 identities are ready, CA calls, peak CA concurrency. Baseline in the same run:
 *    the same cold start with at most 1 CA call in flight.
 * 2. First-message latency of SubscribeToX509SVID for cached identities over the UDS with mTLS
 *    (open stream, first message, cancel), p50/p99, as a ratio to a bare grpc-js unary call over
 *    a UDS with the same mTLS carrying the same payload bytes, samples interleaved.
 * 3. Resident memory per identity with 10,000 identities (certificate manager + pod registry
 *    holding real P-256 SVIDs issued by the pki leaf issuer in a process of their own), in a
 *    fresh process with --expose-gc; baseline: a plain Map holding the same DER chain and key
 *    buffers. Measured at 5,000 / 10,000 / 20,000 identities in one process (GC at each): the
 *    absolute figure (growth to 10,000 / 10,000) next to the marginal slope ((20k - 10k) / 10k),
 *    which leaves out fixed costs such as the young generation. The broker holder runs again with
 *    `--max-semi-space-size` 1/2/4 MB, each next to a default run: CPU per fetch and fetches/s.
 *    `--memory-only` runs just this part.
 *
 * Results print as a markdown table for the broker section of docs/benchmarks.md.
 * BENCH_BROKER_SAMPLES (default 1000) first-message samples per side.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import {
  ChannelCredentials,
  Client,
  Server,
  ServerCredentials,
  type ServiceError,
  type ServerUnaryCall,
  type sendUnaryData,
} from '@grpc/grpc-js';
import { until } from '../test/support/until.js';

const SAMPLES = Number(process.env.BENCH_BROKER_SAMPLES ?? 1000);
const PODS = 500;
const SERVICE_ACCOUNTS = 200;
const MEMORY_IDENTITIES = 10_000;
/** Identity counts measured in one holder process, after a GC each: the slope between the last two is the marginal cost. */
const MEMORY_STAGES = [5_000, MEMORY_IDENTITIES, 20_000] as const;
/** Young-generation caps (`--max-semi-space-size`, MB) compared against Node's default in the same run. */
const SEMI_SPACE_MB = [1, 2, 4] as const;
const ROUNDS = 3;

function pct(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

interface ColdStart {
  readonly concurrency: number;
  readonly ms: number;
  readonly caCalls: number;
  readonly peak: number;
}

async function coldStartAndLatency(): Promise<{ runs: ColdStart[]; latency: { broker: number[]; bare: number[]; payloadBytes: number } }> {
  const { Stack, TD, NODE } = await import('../test/broker/support/stack.js');
  const { startBroker, BrokerClient, firstMessage, brokerMessageType } = await import('../src/broker/index.js');
  const sas = Array.from({ length: SERVICE_ACCOUNTS }, (_, i) => `sa-${i}`);
  const stack = await Stack.start({ tmpPrefix: 'bench-broker-', namespaces: ['bench'], serviceAccounts: sas.map((s) => `bench/${s}`) });
  try {
    const uids: string[] = [];
    for (let i = 0; i < PODS; i++) {
      uids.push(await stack.createPod({ namespace: 'bench', name: `pod-${i}`, serviceAccount: sas[i % SERVICE_ACCOUNTS]!, nodeName: NODE }));
    }
    // Let the CA's pod index see every pod before the clock starts.
    await until(() => {
      const idx = stack.ca.podIndex('Kubernetes');
      return idx !== undefined && idx.getPod({ namespace: 'bench', name: `pod-${PODS - 1}` }) !== undefined;
    }, 'CA pod index', { timeoutMs: 300_000 });
    const identities = sas.map((s) => `spiffe://${TD}/ns/bench/sa/${s}`);
    const runs: ColdStart[] = [];
    let kept: Awaited<ReturnType<typeof startBroker>> | undefined;
    // Alternate baseline (1 in flight) and default (8) over ROUNDS rounds; the last default
    // broker stays up for the latency part.
    for (let round = 0; round < ROUNDS; round++) {
      for (const concurrency of [1, 8]) {
        const config = { ...stack.brokerConfig({ name: `b${round}-${concurrency}` }), maxConcurrentFetches: concurrency };
        const t0 = performance.now();
        const broker = await startBroker(config);
        await until(() => identities.every((id) => broker.certs.current(id) !== undefined), 'all identities ready', { timeoutMs: 300_000 });
        const ms = performance.now() - t0;
        runs.push({ concurrency, ms, caCalls: broker.certs.caCalls, peak: broker.certs.peakInFlight });
        if (concurrency === 8 && round === ROUNDS - 1) kept = broker;
        else await broker.stop(500);
      }
    }
    const broker = kept!;
    await broker.whenReady();

    // First-message latency vs a bare unary call with the same payload and the same mTLS.
    const consumer = await stack.ownSvid('istio-system', 'ztunnel');
    const client = new BrokerClient({
      socketPath: broker.brokerSocketPath,
      rootsPem: stack.ca.rootsPem(),
      certChainPem: consumer.certChainPem,
      privateKeyPem: consumer.privateKeyPem,
      trustDomain: TD,
    });
    const sample = await firstMessage(client.subscribeX509Svid({ uid: uids[0]! }));
    const type = brokerMessageType('spiffe.broker.SubscribeToX509SVIDResponse');
    const payload = Buffer.from(type.encode(type.fromObject(sample as unknown as Record<string, unknown>)).finish());

    const server = new Server();
    const identityFn = (b: Buffer) => b;
    server.addService(
      { Echo: { path: '/bench.Bare/Echo', requestStream: false, responseStream: false, requestSerialize: identityFn, requestDeserialize: identityFn, responseSerialize: identityFn, responseDeserialize: identityFn } },
      { Echo: (_call: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => cb(null, payload) },
    );
    const bare = await stack.ownSvid('istio-system', 'certbroker-node');
    const bareSocket = join(stack.dir, 'bare.sock');
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(
        `unix://${bareSocket}`,
        ServerCredentials.createSsl(Buffer.from(stack.ca.rootsPem()), [{ cert_chain: Buffer.from(bare.certChainPem), private_key: Buffer.from(bare.privateKeyPem.reveal()) }], true),
        (e) => (e ? reject(e) : resolve()),
      ),
    );
    const bareClient = new Client(
      `unix://${bareSocket}`,
      ChannelCredentials.createSsl(Buffer.from(stack.ca.rootsPem()), Buffer.from(consumer.privateKeyPem.reveal()), Buffer.from(consumer.certChainPem), {
        checkServerIdentity: () => undefined,
      }),
    );
    const unary = () =>
      new Promise<void>((resolve, reject) =>
        bareClient.makeUnaryRequest('/bench.Bare/Echo', identityFn, identityFn, Buffer.alloc(64), (e: ServiceError | null) => (e ? reject(e) : resolve())),
      );
    const subscribe = async (uid: string) => {
      const s = client.subscribeX509Svid({ uid });
      await firstMessage(s);
      s.cancel();
    };
    for (let i = 0; i < 50; i++) {
      await subscribe(uids[i % uids.length]!);
      await unary();
    }
    const brokerMs: number[] = [];
    const bareMs: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      let t = performance.now();
      await subscribe(uids[i % uids.length]!);
      brokerMs.push(performance.now() - t);
      t = performance.now();
      await unary();
      bareMs.push(performance.now() - t);
    }
    client.close();
    bareClient.close();
    server.forceShutdown();
    await broker.stop(500);
    return { runs, latency: { broker: brokerMs.sort((a, b) => a - b), bare: bareMs.sort((a, b) => a - b), payloadBytes: payload.length } };
  } finally {
    await stack.close();
  }
}

/** Growth from the empty holder to `identities`, after a GC; cpu and wall of filling the stage's new identities. */
interface MemoryStage {
  readonly identities: number;
  readonly rssBytes: number;
  readonly heapBytes: number;
  readonly heapTotalBytes: number;
  /** CPU (user + system) and wall time spent adding this stage's identities (fetches), before its GC. */
  readonly fillCpuUs: number;
  readonly fillWallMs: number;
}

interface MemoryResult {
  readonly mode: 'broker' | 'bare';
  readonly stages: readonly MemoryStage[];
  readonly identities: number;
  readonly rssBytes: number;
  readonly heapBytes: number;
  /** Growth of the heap V8 has committed (used or not). */
  readonly heapTotalBytes: number;
  readonly externalBytes: number;
}

const memoryIds = Array.from({ length: MEMORY_STAGES.at(-1)! }, (_, i) => `spiffe://cluster.local/ns/ns-${i % 100}/sa/sa-${i}`);

/**
 * Child process: issues MEMORY_IDENTITIES real P-256 SVIDs (pki `FastLeafIssuer`) and writes them
 * to `file`: the root, then per identity the leaf, the PKCS#8 key, the serial and the validity.
 * Issuing happens here, not in the holders, so their RSS growth is what they hold, not what key
 * generation and signing left behind in the allocator.
 */
async function memoryIssueChild(file: string): Promise<void> {
  const { createRootCa, caKeyMaterial, FastLeafIssuer, createCsr, generateKeyPair, exportPkcs8Der } = await import('../src/pki/index.js');
  const { writeFileSync } = await import('node:fs');
  const root = await createRootCa({ subject: 'CN=bench root', ttlSeconds: 86400 * 365 });
  const issuer = new FastLeafIssuer({ signer: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }).leafSigner });
  const parts: Buffer[] = [];
  const field = (b: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32LE(b.length);
    parts.push(len, b);
  };
  field(Buffer.from(root.der));
  for (const identity of memoryIds) {
    const { privateKey } = await generateKeyPair();
    const leaf = issuer.issue({ csr: createCsr({ privateKey, uri: identity }).der, spiffeId: identity, ttlSeconds: 86400 });
    field(Buffer.from(leaf.der));
    field(exportPkcs8Der(privateKey).reveal());
    field(Buffer.from(leaf.serialHex, 'latin1'));
    const times = Buffer.alloc(16);
    times.writeDoubleLE(leaf.notBeforeMs, 0);
    times.writeDoubleLE(leaf.notAfterMs, 8);
    parts.push(times);
  }
  writeFileSync(file, Buffer.concat(parts));
}

/**
 * Child process (--expose-gc): holds the MEMORY_IDENTITIES identities of `file` and reports the
 * memory growth. The file is read whole before the first measurement (one allocation); each CA
 * answer is decoded from it into fresh buffers, as the gRPC client's PEM decoding makes them.
 */
async function memoryChild(mode: 'broker' | 'bare', file: string): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc!;
  const { X509Certificate } = await import('node:crypto');
  const { readFileSync } = await import('node:fs');
  const { CertManager, NodePods } = await import('../src/broker/cache/index.js');
  const { systemClock } = await import('../src/core/clock.js');
  const { Secret } = await import('../src/core/secret.js');
  const data = readFileSync(file);
  let at = 0;
  const field = () => {
    const len = data.readUInt32LE(at);
    at += 4 + len;
    return data.subarray(at - len, at);
  };
  const rootView = field();
  const offsets = new Map<string, number>();
  for (const id of memoryIds) {
    offsets.set(id, at);
    field();
    field();
    field();
    at += 16;
  }
  /** One CA answer: fresh buffers decoded from the file, as a client decodes a response. */
  const answer = (identity: string) => {
    at = offsets.get(identity)!;
    const leafDer = Buffer.from(field());
    const key = Buffer.from(field());
    const serial = field().toString('latin1');
    const notBefore = data.readDoubleLE(at);
    const notAfter = data.readDoubleLE(at + 8);
    return { leafDer, key, serial, notBefore, notAfter, rootDer: Buffer.from(rootView) };
  };
  const settle = async () => {
    for (let i = 0; i < 3; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  gc();
  await new Promise((r) => setTimeout(r, 50));
  gc();
  const before = process.memoryUsage();
  const stages: MemoryStage[] = [];
  let at10k: NodeJS.MemoryUsage | undefined;
  let fill: (from: number, to: number) => Promise<void>;
  let keep: unknown;
  if (mode === 'bare') {
    const map = new Map<string, { chain: Buffer; key: Buffer }>();
    fill = async (from, to) => {
      for (const id of memoryIds.slice(from, to)) {
        const c = answer(id);
        map.set(id, { chain: c.leafDer, key: c.key });
      }
    };
    keep = map;
  } else {
    const certs = new CertManager({
      ca: {
        fetchCertificate: async (identity) => {
          const c = answer(identity);
          new X509Certificate(c.leafDer); // the real client parses each leaf too
          return { identity, chainDer: [c.leafDer], rootsDer: [c.rootDer], privateKey: new Secret(c.key), serial: c.serial, notBefore: c.notBefore, notAfter: c.notAfter };
        },
      },
      clock: systemClock,
      rng: Math.random,
      maxConcurrentFetches: 8,
    });
    const pods = new NodePods({ nodeName: 'node-1', trustDomain: 'cluster.local', certs, now: Date.now });
    fill = async (from, to) => {
      for (let i = from; i < to; i++) {
        const m = /ns\/([^/]+)\/sa\/(.+)$/.exec(memoryIds[i]!)!;
        pods.upsert({ uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, namespace: m[1]!, name: `pod-${i}`, serviceAccount: m[2]!, nodeName: 'node-1', hostNetwork: false, deleting: false, phase: 'Running' });
      }
      await until(() => certs.countByState().ready === to, 'all ready', { timeoutMs: 600_000 });
    };
    keep = { certs, pods };
  }
  let done = 0;
  for (const n of MEMORY_STAGES) {
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await fill(done, n);
    const fillWallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    done = n;
    await settle();
    const m = process.memoryUsage();
    if (n === MEMORY_IDENTITIES) at10k = m;
    stages.push({ identities: n, rssBytes: m.rss - before.rss, heapBytes: m.heapUsed - before.heapUsed, heapTotalBytes: m.heapTotal - before.heapTotal, fillCpuUs: cpu.user + cpu.system, fillWallMs });
  }
  const after = at10k!;
  const result: MemoryResult = {
    mode,
    stages,
    identities: MEMORY_IDENTITIES,
    rssBytes: after.rss - before.rss,
    heapBytes: after.heapUsed - before.heapUsed,
    heapTotalBytes: after.heapTotal - before.heapTotal,
    externalBytes: after.external + after.arrayBuffers - before.external - before.arrayBuffers,
  };
  void keep;
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0);
}

function runChild(args: readonly string[], nodeFlags: readonly string[] = []): string {
  const r = spawnSync(process.execPath, ['--expose-gc', ...nodeFlags, fileURLToPath(import.meta.url), ...args], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`child ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

function runMemoryChild(mode: 'broker' | 'bare', file: string, nodeFlags: readonly string[] = []): MemoryResult {
  return JSON.parse(runChild(['--memory-child', mode, file], nodeFlags).trim().split('\n').at(-1)!) as MemoryResult;
}

interface MemoryRun {
  readonly bare: MemoryResult;
  readonly broker: MemoryResult;
  /** The broker holder again with `--max-semi-space-size=<mb>`, interleaved with default runs. */
  readonly capped: readonly { readonly semiSpaceMb: number; readonly broker: MemoryResult; readonly defaultBroker: MemoryResult }[];
}

/** Issues the identities once (own process), then measures each holder in a fresh process. */
async function measureMemory(): Promise<MemoryRun> {
  const { mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'broker-memory-'));
  try {
    const file = join(dir, 'svids.bin');
    runChild(['--memory-issue', file]);
    const bare = runMemoryChild('bare', file);
    const broker = runMemoryChild('broker', file);
    // Each cap next to a default run of its own, so a load change between them shows as a ratio.
    const capped = SEMI_SPACE_MB.map((mb) => ({
      semiSpaceMb: mb,
      broker: runMemoryChild('broker', file, [`--max-semi-space-size=${mb}`]),
      defaultBroker: runMemoryChild('broker', file),
    }));
    return { bare, broker, capped };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function memoryTable(run: MemoryRun): string[] {
  const kb = (b: number) => (b / 1024).toFixed(2);
  const per = (m: MemoryResult, f: keyof MemoryResult) => (m[f] as number) / m.identities;
  const stage = (m: MemoryResult, n: number) => m.stages.find((s) => s.identities === n)!;
  const [, mid, last] = MEMORY_STAGES;
  /** (X(20k) - X(10k)) / 10k: what one more identity costs, without the fixed part. */
  const slope = (m: MemoryResult, f: 'rssBytes' | 'heapBytes' | 'heapTotalBytes') => (stage(m, last)[f] - stage(m, mid)[f]) / (last - mid);
  /** CPU per fetch over every stage's fill (all 20,000 identities). */
  const cpuPerFetchUs = (m: MemoryResult) => m.stages.reduce((t, s) => t + s.fillCpuUs, 0) / last;
  const fetchesPerS = (m: MemoryResult) => last / (m.stages.reduce((t, s) => t + s.fillWallMs, 0) / 1000);
  const lines: string[] = [];
  lines.push(`### Memory with ${MEMORY_IDENTITIES.toLocaleString('en')} identities (one pod each, real P-256 SVIDs), after GC`, '');
  lines.push(
    `Absolute: growth from the empty holder to ${mid.toLocaleString('en')} identities, divided by ${mid.toLocaleString('en')} (includes fixed costs such as the young generation V8 grew while fetching). ` +
      `Marginal: (X(${last.toLocaleString('en')}) - X(${mid.toLocaleString('en')})) / ${(last - mid).toLocaleString('en')} in the same process, after a GC at each point: what one more identity costs.`,
    '',
  );
  lines.push(
    '| holder | RSS KiB / identity, absolute | RSS KiB / identity, marginal | heap used KiB / identity, absolute / marginal | heap committed KiB / identity, absolute / marginal | off-heap KiB / identity | RSS at 5k / 10k / 20k, MB | RSS / baseline (absolute) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
  );
  const mb = (m: MemoryResult) => m.stages.map((s) => (s.rssBytes / 1048576).toFixed(1)).join(' / ');
  const row = (name: string, m: MemoryResult) =>
    `| ${name} | ${kb(per(m, 'rssBytes'))} | ${kb(slope(m, 'rssBytes'))} | ${kb(per(m, 'heapBytes'))} / ${kb(slope(m, 'heapBytes'))} | ${kb(per(m, 'heapTotalBytes'))} / ${kb(slope(m, 'heapTotalBytes'))} | ${kb(per(m, 'externalBytes'))} | ${mb(m)} | ${(per(m, 'rssBytes') / per(run.bare, 'rssBytes')).toFixed(2)} |`;
  lines.push(row('Map of DER chain + key buffers (baseline)', run.bare));
  lines.push(row('CertManager + NodePods (Node defaults)', run.broker));
  for (const c of run.capped) {
    lines.push(row(`CertManager + NodePods, \`--max-semi-space-size=${c.semiSpaceMb}\``, c.broker));
    lines.push(row(`CertManager + NodePods, defaults (run next to the ${c.semiSpaceMb} MB cap)`, c.defaultBroker));
  }
  lines.push('', `### Fetch cost with the young generation capped (${last.toLocaleString('en')} fetches into the cache, decode + X509 parse + entry, per holder process)`, '');
  lines.push('| node flag | CPU µs / fetch | fetches / s | CPU / default (run next to it) | fetches/s / default | RSS absolute / default |', '|---|---:|---:|---:|---:|---:|');
  lines.push(`| defaults (first run) | ${cpuPerFetchUs(run.broker).toFixed(1)} | ${fetchesPerS(run.broker).toFixed(0)} | 1.00 | 1.00 | 1.00 |`);
  for (const c of run.capped) {
    const d = c.defaultBroker;
    lines.push(
      `| \`--max-semi-space-size=${c.semiSpaceMb}\` | ${cpuPerFetchUs(c.broker).toFixed(1)} | ${fetchesPerS(c.broker).toFixed(0)} | ${(cpuPerFetchUs(c.broker) / cpuPerFetchUs(d)).toFixed(2)} | ${(fetchesPerS(c.broker) / fetchesPerS(d)).toFixed(2)} | ${(c.broker.rssBytes / d.rssBytes).toFixed(2)} |`,
    );
  }
  return lines;
}

async function main(): Promise<void> {
  const childAt = process.argv.indexOf('--memory-child');
  if (childAt >= 0) return memoryChild(process.argv[childAt + 1] as 'broker' | 'bare', process.argv[childAt + 2]!);
  const issueAt = process.argv.indexOf('--memory-issue');
  if (issueAt >= 0) return memoryIssueChild(process.argv[issueAt + 1]!);
  if (process.argv.includes('--memory-only')) {
    const run = await measureMemory();
    process.stdout.write(JSON.stringify(run) + '\n' + memoryTable(run).join('\n') + '\n');
    return;
  }

  const { runs, latency } = await coldStartAndLatency();
  const memory = await measureMemory();

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const summary = [1, 8].map((concurrency) => {
    const rs = runs.filter((r) => r.concurrency === concurrency);
    return { concurrency, ms: median(rs.map((r) => r.ms)), all: rs.map((r) => r.ms.toFixed(0)).join(' / '), caCalls: median(rs.map((r) => r.caCalls)), peak: Math.max(...rs.map((r) => r.peak)) };
  });
  const base = summary[0]!;
  const lines: string[] = [];
  lines.push(`### Cold start: ${PODS} pods across ${SERVICE_ACCOUNTS} service accounts (real CA over TLS, same process), median of ${ROUNDS} alternating rounds`, '');
  lines.push('| max CA calls in flight | time to all ready, ms (median) | each round, ms | CA calls | peak in flight | time / baseline |', '|---:|---:|---:|---:|---:|---:|');
  for (const r of summary) lines.push(`| ${r.concurrency}${r.concurrency === 1 ? ' (baseline)' : ' (default)'} | ${r.ms.toFixed(0)} | ${r.all} | ${r.caCalls} | ${r.peak} | ${(r.ms / base.ms).toFixed(2)} |`);
  lines.push('', `### First message of SubscribeToX509SVID for a cached identity (UDS + mTLS), ${SAMPLES} samples each, interleaved`, '');
  lines.push('| call | p50 ms | p99 ms | p50 / bare | p99 / bare |', '|---|---:|---:|---:|---:|');
  const b50 = pct(latency.bare, 50);
  const b99 = pct(latency.bare, 99);
  lines.push(`| bare grpc-js unary, same ${latency.payloadBytes}-byte payload (baseline) | ${b50.toFixed(3)} | ${b99.toFixed(3)} | 1.00 | 1.00 |`);
  lines.push(`| SubscribeToX509SVID: open, first message, cancel | ${pct(latency.broker, 50).toFixed(3)} | ${pct(latency.broker, 99).toFixed(3)} | ${(pct(latency.broker, 50) / b50).toFixed(2)} | ${(pct(latency.broker, 99) / b99).toFixed(2)} |`);
  lines.push('', ...memoryTable(memory));
  lines.push('', `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}, Node ${process.version}, ${(await import('node:os')).availableParallelism()} cores.`);
  process.stdout.write(lines.join('\n') + '\n');
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:broker failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  },
);
