/**
 * `npm run bench:churn` — the CA under many nodes' renewals and pod churn, time-compressed.
 *
 * One process simulates every node's broker with a light client: its own bound ztunnel token
 * (a TokenRequest per simulated broker pod), one TLS HTTP/2 connection, gRPC CreateCertificate
 * frames impersonating identities that really have pods on its node, renewing each at the
 * broker's own refresh point (src/broker/cache/refresh-policy.ts `refreshDelay`, retries by
 * `retryDelay`) with the broker's own fetch queue (FetchSlots, 8 calls at once). The devcluster
 * runs in this process too (TokenReview, pods); the CA is `certbroker ca` as its own process(es),
 * TLS, self-signed root in istio-ca-secret, default signing workers — first one process, then
 * three (each simulated broker holds a connection to every CA and sends its calls round robin
 * over them, as the broker's grpc-js channel does over the headless Service of the replicas).
 *
 * Pod churn: a driver deletes a random workload pod and creates one of another service account
 * on the same node through the API at BENCH_CHURN_RATE pods/s; that node's broker drops the old
 * identity and fetches the new one at once (a CA whose informer has not seen the pod yet refuses
 * it, and the broker's retry policy takes over: those are reported, not hidden).
 *
 * Steady state: each identity's first fetch is spread uniformly over one renewal interval (as in
 * a cluster whose nodes did not all start at once); the window opens after one interval.
 * Reported: CA calls/s, TokenReviews/s at the devcluster (its request log), p50/p99 call latency
 * seen by the brokers, CA CPU per call (all CA processes, /proc, window only; idle CPU measured
 * before the load and reported apart), and the nodes one CA core sustains at TTL T.
 *
 * Short by default (`npm run bench`); `BENCH_CHURN_LONG=1` (or `--long`) runs 1,000 nodes x 30
 * service accounts. Overrides: BENCH_CHURN_NODES, BENCH_CHURN_SAS (identities per node),
 * BENCH_CHURN_TTL_SECONDS, BENCH_CHURN_SECONDS (window), BENCH_CHURN_RATE (pods replaced per
 * second), BENCH_CHURN_TOKEN_CACHE_SECONDS (the CA's CA_TOKEN_CACHE_SECONDS), BENCH_CHURN_CAS
 * (e.g. "1,3"), BENCH_CHURN_WARM_SECONDS (shortest warm-up; default one renewal interval),
 * BENCH_CHURN_DOCS (file written instead of docs/benchmarks.md).
 *
 * BENCH_CHURN_COLD=1: a cold start instead — every broker asks for all its identities at once (a
 * fleet restarting after a CA outage); the warm-up then lasts until every identity held a
 * certificate once (at most BENCH_CHURN_COLD_CAP_SECONDS) and its line says how long that took
 * and what the CA refused meanwhile (RESOURCE_EXHAUSTED with its retry pushback, which the
 * simulated brokers honour through the broker's own retryDelay). The simulated call has the
 * broker's deadline (DEFAULT_CA_CALL_TIMEOUT_MS). Also reported: this process's event-loop delay
 * and CPU (devcluster + brokers share it) and the machine's load average, to tell which resource
 * ran out.
 */
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { RawCaSession } from '../test/ca/support/raw-grpc.js';
import { cpus, loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pct, writeDocSection } from './report.js';
import { procCpuSeconds } from './proc-cpu.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const LONG = process.env.BENCH_CHURN_LONG === '1' || process.argv.includes('--long');
const num = (name: string, short: number, long: number): number => {
  const v = process.env[name];
  return v === undefined || v === '' ? (LONG ? long : short) : Number(v);
};
const NODES = num('BENCH_CHURN_NODES', 40, 1000);
const SAS = num('BENCH_CHURN_SAS', 8, 30);
const TTL = num('BENCH_CHURN_TTL_SECONDS', 20, 120);
const WINDOW = num('BENCH_CHURN_SECONDS', 30, 120);
const RATE = num('BENCH_CHURN_RATE', 2, 20);
const TOKEN_CACHE = num('BENCH_CHURN_TOKEN_CACHE_SECONDS', 10, 30);
const CA_COUNTS = (process.env.BENCH_CHURN_CAS ?? '1,3').split(',').map(Number);
/** Cold start: every broker asks for all its identities at once (a fleet restart after a CA outage), not spread over an interval. */
const COLD = process.env.BENCH_CHURN_COLD === '1';
/** How long a cold start may take to have every identity ready before the window opens anyway. */
const COLD_CAP_SECONDS = num('BENCH_CHURN_COLD_CAP_SECONDS', 120, 600);
/**
 * The shortest warm-up before the window opens, seconds (default: one renewal interval). After a
 * cold start with long certificates (TTL 1 h: ~1740 s) the window may open as soon as every
 * identity held a certificate: its "due" column then says how many calls the schedule asked for.
 */
const WARM_MIN_SECONDS = process.env.BENCH_CHURN_WARM_SECONDS ? Number(process.env.BENCH_CHURN_WARM_SECONDS) : undefined;
/** Service accounts in the pool the churn draws from (each node holds SAS of them at a time). */
const POOL = SAS * 3;
const NAMESPACES = 5;
const TD = 'cluster.local';
const CSR_COUNT = 32;
const MAX_FETCHES = 8;
const BACKDATE_SECONDS = 120;
const TOKEN_REVIEW_PATH = '/apis/authentication.k8s.io/v1/tokenreviews';

const saName = (j: number) => ({ namespace: `app-${j % NAMESPACES}`, name: `sa-${j}` });
const identityOf = (j: number) => `spiffe://${TD}/ns/${saName(j).namespace}/sa/${saName(j).name}`;

/** What the window counts. */
interface Stats {
  measuring: boolean;
  ok: number;
  churnFetches: number;
  failures: Map<string, number>;
  latenciesMs: number[];
  churnOps: number;
  /** Fetches the brokers' schedule started (first fetches, renewals, churn; not retries). */
  due: number;
}

const newStats = (): Stats => ({ measuring: false, ok: 0, churnFetches: 0, failures: new Map(), latenciesMs: [], churnOps: 0, due: 0 });

async function main(): Promise<void> {
  const pki = await import('../src/pki/index.js');
  const { protobufRoot } = await import('../src/grpc/index.js');
  const { FetchSlots, refreshDelay, retryDelay, fetchFailureInfoOf, DEFAULT_REFRESH_POLICY } = await import('../src/broker/cache/index.js');
  const { grpcTimeoutHeader, parseRetryPushbackMs, RETRY_PUSHBACK_METADATA } = await import('../src/grpc/index.js');
  const { DEFAULT_CA_CALL_TIMEOUT_MS } = await import('../src/grpc/istio-ca-channel.js');
  const { CaCallError } = await import('../src/broker/adapters/index.js');
  const { parseManifest } = await import('../src/devcluster/index.js');
  const { CA_CERT_KEY } = await import('../src/ca/index.js');
  const { CA_NAMESPACE, CA_SA, httpGet, startCaEnv } = await import('../test/ca/support/ca-env.js');
  const { startCaProcess } = await import('../test/ca/support/ca-process.js');
  const { requestFrame, rawCaSession } = await import('../test/ca/support/raw-grpc.js');
  const { tempDir } = await import('../test/ca/support/pki-fixtures.js');
  const { seededRng } = await import('../test/support/seeded-rng.js');
  const { eventually } = await import('../test/broker/support/eventually.js');
  const Res = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateResponse');
  const rng = seededRng(15);
  const now = () => Date.now();
  /** The broker's renewal interval for a fresh certificate of `ttlSeconds` (the jitter's middle). */
  const intervalSeconds = (ttlSeconds: number) => {
    const t = 1e12;
    return refreshDelay({ notBefore: t - BACKDATE_SECONDS * 1000, notAfter: t + ttlSeconds * 1000 }, t, () => 0.5) / 1000;
  };
  const interval = intervalSeconds(TTL);

  process.stdout.write(
    `bench:churn — ${NODES} nodes x ${SAS} identities (pool ${POOL} service accounts), TTL ${TTL} s (renewal every ~${interval.toFixed(1)} s), churn ${RATE} pods/s, token cache ${TOKEN_CACHE} s, ${WINDOW} s window, CAs ${CA_COUNTS.join(' then ')}, ${cpus().length} cores\n`,
  );
  const csrs: string[] = [];
  for (let i = 0; i < CSR_COUNT; i++) {
    const { privateKey } = await pki.generateKeyPair();
    csrs.push(pki.createCsr({ privateKey, uri: `spiffe://${TD}/ns/ignored/sa/ignored` }).pem);
  }

  const dir = await tempDir('bench-churn-');
  const env = await startCaEnv();
  const results: PhaseResult[] = [];
  try {
    // --- the cluster: nodes, broker pods with bound tokens, SAS workload pods per node ---
    const t0 = performance.now();
    await env.cluster.apply(parseManifest(readFileSync(join(ROOT, 'deploy/rbac-ca.yaml'), 'utf8')) as object[]);
    await env.ensureServiceAccount('istio-system', 'ztunnel');
    const base: object[] = [];
    for (let n = 0; n < NAMESPACES; n++) base.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `app-${n}` } });
    for (let j = 0; j < POOL; j++) base.push({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: saName(j) });
    for (let i = 0; i < NODES; i++) base.push({ apiVersion: 'v1', kind: 'Node', metadata: { name: `node-${i}` } });
    await env.cluster.apply(base);
    const podObject = (namespace: string, name: string, serviceAccount: string, node: string) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace },
      spec: { serviceAccountName: serviceAccount, nodeName: node, containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
    });
    /** Per node: slot -> the service-account index and pod name there now. */
    const slots: Array<Array<{ sa: number; pod: string }>> = [];
    let podSeq = 0;
    for (let i = 0; i < NODES; i++) {
      const pods: object[] = [podObject('istio-system', `ztunnel-${i}`, 'ztunnel', `node-${i}`)];
      const row: Array<{ sa: number; pod: string }> = [];
      for (let k = 0; k < SAS; k++) {
        const sa = (i * 7 + k) % POOL;
        const pod = `w-${i}-${podSeq++}`;
        row.push({ sa, pod });
        pods.push(podObject(saName(sa).namespace, pod, saName(sa).name, `node-${i}`));
      }
      slots.push(row);
      await env.cluster.apply(pods);
    }
    const tokens: string[] = new Array<string>(NODES);
    const pending = Array.from({ length: NODES }, (_, i) => i);
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (let i = pending.shift(); i !== undefined; i = pending.shift()) {
          tokens[i] = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: `ztunnel-${i}`, expirationSeconds: 6 * 3600 });
        }
      }),
    );
    process.stdout.write(`cluster ready: ${NODES * (SAS + 1)} pods, ${NODES} bound tokens in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);

    const kubeconfig = join(dir.path, 'kubeconfig');
    const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer], expirationSeconds: 48 * 3600 });
    const { writeFile } = await import('node:fs/promises');
    await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });

    for (const caCount of CA_COUNTS) {
      // --- the CA processes ---
      const procs: Array<Awaited<ReturnType<typeof startCaProcess>>> = [];
      try {
        for (let c = 0; c < caCount; c++) {
          procs.push(
            await startCaProcess(dir.path, ['--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', '127.0.0.1:0'], {
              POD_NAME: `ca-${c}`,
              CA_NAMESPACE,
              CA_SERVING_DNS_NAMES: 'localhost',
              CA_TRUSTED_NODE_ACCOUNTS: 'istio-system/ztunnel',
              CA_TOKEN_CACHE_SECONDS: String(TOKEN_CACHE),
            }),
          );
        }
        const opsPorts = await Promise.all(procs.map(async (p) => Number((await p.log.waitFor((r) => r.msg === 'ops endpoint listening')).port)));
        for (const port of opsPorts) await eventually(`CA ops :${port} ready`, async () => (await httpGet(port, '/readyz')).status === 200, 2400);
        const secret = await env.core.readNamespacedSecret({ namespace: CA_NAMESPACE, name: 'istio-ca-secret' });
        const rootPem = Buffer.from(secret.data![CA_CERT_KEY]!, 'base64').toString('utf8');
        const pids = procs.map((p) => p.child.pid!);
        const caCpu = () => pids.reduce((s, pid) => s + procCpuSeconds(pid), 0);
        // Idle cost (informers, lease, keepalives) before any load.
        const idle0 = caCpu();
        await new Promise((r) => setTimeout(r, 3000));
        const idleCores = (caCpu() - idle0) / 3;

        // --- the simulated brokers ---
        // The warm-up's counts first (the start: cold or spread), then the window's.
        let stats = newStats();
        stats.measuring = true;
        /** Identities wanted at the start that have not held a certificate yet ("node/sa"). */
        const initialPending = new Set<string>();
        const brokers: SimBroker[] = [];
        let stopped = false;
        class SimBroker {
          /** One connection per CA; calls go round robin over them, as the broker's grpc-js channel does over the headless Service. */
          readonly sessions: RawCaSession[];
          #next: number;
          readonly queue = new FetchSlots<number>(MAX_FETCHES);
          /** Identities (service-account index) with a pod on this node -> what is held. */
          readonly wanted = new Map<number, { notBefore: number; notAfter: number; attempt: number; timer?: NodeJS.Timeout; churned: boolean }>();
          constructor(readonly node: number, ports: readonly number[]) {
            this.ports = ports;
            this.sessions = ports.map((port) => SimBroker.open(port));
            this.#next = node % ports.length;
          }
          readonly ports: readonly number[];
          static open(port: number): RawCaSession {
            return rawCaSession({ port, rootsPem: () => rootPem }, { servername: 'localhost' });
          }
          /** The next CA's connection, opened again if the CA closed it (grpc-js reconnects the same way). */
          nextSession(): RawCaSession {
            const i = this.#next++ % this.sessions.length;
            if (this.sessions[i]!.session.closed || this.sessions[i]!.session.destroyed) this.sessions[i] = SimBroker.open(this.ports[i]!);
            return this.sessions[i]!;
          }
          want(sa: number, delayMs: number, churned: boolean): void {
            const w = { notBefore: 0, notAfter: 0, attempt: 0, churned };
            this.wanted.set(sa, w);
            this.schedule(sa, delayMs);
          }
          drop(sa: number): void {
            initialPending.delete(`${this.node}/${sa}`);
            const w = this.wanted.get(sa);
            if (w?.timer) clearTimeout(w.timer);
            this.wanted.delete(sa);
            this.queue.delete(sa);
          }
          schedule(sa: number, delayMs: number): void {
            const w = this.wanted.get(sa);
            if (!w || stopped) return;
            if (w.timer) clearTimeout(w.timer);
            w.timer = setTimeout(() => {
              if (stats.measuring && w.attempt === 0) stats.due++;
              this.queue.push(sa, w.notAfter === 0 ? 'realtime' : 'background');
              this.pump();
            }, delayMs);
          }
          pump(): void {
            for (let sa = this.queue.take((k) => (this.wanted.has(k) ? k : undefined)); sa !== undefined; sa = this.queue.take((k) => (this.wanted.has(k) ? k : undefined))) {
              const key = sa;
              void this.fetch(key).finally(() => {
                this.queue.release();
                if (!stopped) this.pump();
              });
            }
          }
          async fetch(sa: number): Promise<void> {
            const started = performance.now();
            const frame = requestFrame({ csr: csrs[Math.floor(rng() * CSR_COUNT)], validity_duration: TTL, metadata: { fields: { ImpersonatedIdentity: { stringValue: identityOf(sa) } } } });
            const outcome = await this.call(frame);
            const w = this.wanted.get(sa);
            if (stats.measuring) {
              if (outcome.chain) {
                stats.ok++;
                if (w?.churned && w.notAfter === 0) stats.churnFetches++;
                stats.latenciesMs.push(performance.now() - started);
              } else stats.failures.set(outcome.error!, (stats.failures.get(outcome.error!) ?? 0) + 1);
            }
            if (!w || stopped) return;
            if (outcome.chain) {
              initialPending.delete(`${this.node}/${sa}`);
              const leaf = new X509Certificate(outcome.chain);
              w.notBefore = Date.parse(leaf.validFrom);
              w.notAfter = Date.parse(leaf.validTo);
              w.attempt = 0;
              this.schedule(sa, refreshDelay(w, now(), rng));
            } else {
              const held = w.notAfter > 0 ? { notBefore: w.notBefore, notAfter: w.notAfter } : undefined;
              this.schedule(sa, retryDelay(w.attempt++, held, now(), rng, DEFAULT_REFRESH_POLICY, fetchFailureInfoOf(outcome.err)));
            }
          }
          /**
           * One CreateCertificate call: the leaf PEM, or why not. With the broker's call deadline
           * (DEFAULT_CA_CALL_TIMEOUT_MS, sent as grpc-timeout and enforced here: DEADLINE_EXCEEDED)
           * and the CA's retry pushback read as the broker's channel reads it.
           */
          async call(frame: Buffer): Promise<{ chain?: string; error?: string; err?: unknown }> {
            let r;
            try {
              const headers = { 'grpc-timeout': grpcTimeoutHeader(DEFAULT_CA_CALL_TIMEOUT_MS), authorization: `Bearer ${tokens[this.node]}` };
              r = await this.nextSession().call(headers, frame, { deadlineMs: DEFAULT_CA_CALL_TIMEOUT_MS });
            } catch (e) {
              return { error: 'session closed', err: e };
            }
            if (r.grpc === 0) {
              const res = Res.decode(r.body.subarray(5)) as unknown as { cert_chain: string[] };
              return { chain: res.cert_chain[0]! };
            }
            const status = r.grpc ?? (r.deadlineExceeded ? 4 : 14);
            const message = decodeURIComponent(r.metadata['grpc-message'] ?? '') || (r.deadlineExceeded ? 'deadline exceeded (client)' : '');
            // The broker's CA client's own mapping of the status onto the error model (the retry policy reads it).
            const err = CaCallError.fromStatus(status, message, undefined, parseRetryPushbackMs(r.metadata[RETRY_PUSHBACK_METADATA]));
            const label = r.grpc !== undefined || r.deadlineExceeded ? `grpc-status ${r.grpc ?? 4} ${message.slice(0, 80)}` : `no grpc-status (http ${r.http ?? 'none'}, RST_STREAM ${r.rstCode ?? 'none'})`;
            return { error: label, err };
          }
          close(): void {
            for (const w of this.wanted.values()) if (w.timer) clearTimeout(w.timer);
            for (const s of this.sessions) s.close();
          }
        }
        for (let i = 0; i < NODES; i++) {
          const b = new SimBroker(i, procs.map((p) => p.port));
          brokers.push(b);
          for (const s of slots[i]!) {
            initialPending.add(`${i}/${s.sa}`);
            b.want(s.sa, COLD ? 0 : rng() * interval * 1000, false);
          }
        }
        const start0 = performance.now();
        env.cluster.requestLog.clear();
        let reviews = 0;
        const countReviews = () => {
          reviews += env.cluster.requestLog.entries({ method: 'POST', path: TOKEN_REVIEW_PATH }).length;
          env.cluster.requestLog.clear();
        };
        const poll = setInterval(countReviews, 500);
        const warmLoop = monitorEventLoopDelay({ resolution: 20 });
        warmLoop.enable();
        const warmSim0 = process.cpuUsage();
        const warmCpu0 = caCpu();
        const warmLoad0 = loadavg()[0]!;

        // --- pod churn through the API ---
        let churnInFlight = 0;
        const churning = new Set<string>();
        const churnOnce = async () => {
          const i = Math.floor(rng() * NODES);
          const row = slots[i]!;
          const k = Math.floor(rng() * SAS);
          // One replacement per slot at a time (the next one would delete a pod not created yet).
          if (churning.has(`${i}/${k}`)) return;
          churning.add(`${i}/${k}`);
          const old = row[k]!;
          const onNode = new Set(row.map((s) => s.sa));
          let sa = Math.floor(rng() * POOL);
          while (onNode.has(sa)) sa = (sa + 1) % POOL;
          const pod = `w-${i}-${podSeq++}`;
          row[k] = { sa, pod };
          await env.core.deleteNamespacedPod({ namespace: saName(old.sa).namespace, name: old.pod, gracePeriodSeconds: 0 });
          brokers[i]!.drop(old.sa);
          await env.core.createNamespacedPod({ namespace: saName(sa).namespace, body: podObject(saName(sa).namespace, pod, saName(sa).name, `node-${i}`) as never });
          churning.delete(`${i}/${k}`);
          brokers[i]!.want(sa, 0, true);
          if (stats.measuring) stats.churnOps++;
        };
        const churnTimer = RATE > 0
          ? setInterval(() => {
              if (churnInFlight >= 16) return;
              churnInFlight++;
              churnOnce()
                .catch((e: unknown) => process.stderr.write(`churn: ${e instanceof Error ? e.message : String(e)}\n`))
                .finally(() => churnInFlight--);
            }, 1000 / RATE)
          : undefined;

        // --- warm-up: one interval, and (cold start) until every identity held a certificate once ---
        let readyAfter: number | undefined;
        const warmMin = WARM_MIN_SECONDS ?? interval + 2;
        const warmCap = Math.max(warmMin, COLD ? COLD_CAP_SECONDS : 0) * 1000;
        while (performance.now() - start0 < warmCap) {
          if (initialPending.size === 0 && readyAfter === undefined) readyAfter = (performance.now() - start0) / 1000;
          if (readyAfter !== undefined && performance.now() - start0 >= warmMin * 1000) break;
          await new Promise((r) => setTimeout(r, 250));
        }
        const warm = stats;
        const warmSeconds = (performance.now() - start0) / 1000;
        countReviews();
        const warmReviews = reviews;
        reviews = 0;
        const warmSim = process.cpuUsage(warmSim0);
        warmLoop.disable();
        // Until every identity held one (or the whole warm-up if never): the cold start's own rates.
        const coldSeconds = readyAfter ?? warmSeconds;
        const warmRates = `; over the warm-up (${warmSeconds.toFixed(0)} s): ${(warm.ok / warmSeconds).toFixed(1)} calls/s answered${readyAfter !== undefined ? ` (${(warm.ok / coldSeconds).toFixed(1)}/s until all held one)` : ''}, TokenReviews ${(warmReviews / warmSeconds).toFixed(2)}/s (bound ~${((caCount * NODES) / TOKEN_CACHE).toFixed(2)}/s), CA ${((caCpu() - warmCpu0) / warmSeconds).toFixed(2)} cores, brokers + devcluster process ${((warmSim.user + warmSim.system) / 1e6 / warmSeconds).toFixed(2)} cores with event-loop delay p99 ${(warmLoop.percentile(99) / 1e6).toFixed(0)} ms, load average ${warmLoad0.toFixed(1)} → ${loadavg()[0]!.toFixed(1)}`;
        const warmLine = `${COLD ? 'cold start (every broker at once)' : 'spread start (first fetches over one interval)'}: ${readyAfter !== undefined ? `all ${NODES * SAS} identities held a certificate ${readyAfter.toFixed(1)} s after the start` : `${NODES * SAS - initialPending.size} of ${NODES * SAS} identities held a certificate after ${warmSeconds.toFixed(0)} s${COLD ? ' (never all)' : ' (the spread start fetches the rest later)'}`}; ${warm.ok} calls answered, ${[...warm.failures.values()].reduce((a, b) => a + b, 0)} failed${warm.failures.size ? ` (${[...warm.failures.entries()].map(([k, v]) => `${v}× ${k}`).join('; ')})` : ''}, latency p50 / p99 ${warm.latenciesMs.length ? `${pct([...warm.latenciesMs].sort((a, b) => a - b), 50).toFixed(0)} / ${pct([...warm.latenciesMs].sort((a, b) => a - b), 99).toFixed(0)}` : '-'} ms${warmRates}`;
        process.stdout.write(`${caCount} CA warm-up, ${warmLine}\n`);
        stats = newStats();
        const warmDenials = caDenials(procs.map((p) => p.log.lines));
        if (warmDenials.size) process.stdout.write(`${caCount} CA warm-up, CA denial reasons: ${[...warmDenials.entries()].map(([k, v]) => `${v}× ${k}`).join('; ')}\n`);
        for (const p of procs) p.log.lines.length = 0;
        stats.measuring = true;
        // This process's event loop (devcluster + every simulated broker) and the machine's load in the window.
        const loop = monitorEventLoopDelay({ resolution: 20 });
        loop.enable();
        const load0 = loadavg()[0]!;
        const sim0 = process.cpuUsage();
        const cpu0 = caCpu();
        const w0 = performance.now();
        await new Promise((r) => setTimeout(r, WINDOW * 1000));
        stats.measuring = false;
        const seconds = (performance.now() - w0) / 1000;
        const cpuSeconds = caCpu() - cpu0;
        const sim = process.cpuUsage(sim0);
        loop.disable();
        const loopP99Ms = loop.percentile(99) / 1e6;
        const loadAverage = (load0 + loadavg()[0]!) / 2;
        const denials = caDenials(procs.map((p) => p.log.lines));
        clearInterval(poll);
        countReviews();
        stopped = true;
        if (churnTimer) clearInterval(churnTimer);
        // A starved devcluster may hold churn requests for long: wait, but report rather than fail.
        await eventually('churn settles', () => churnInFlight === 0, 4800).catch(() => process.stdout.write(`  ${churnInFlight} churn requests still open after 2 min\n`));
        for (const b of brokers) b.close();

        const lat = [...stats.latenciesMs].sort((a, b) => a - b);
        const failures = [...stats.failures.values()].reduce((a, b) => a + b, 0);
        const r: PhaseResult = {
          cas: caCount,
          callsPerSecond: stats.ok / seconds,
          expectedPerSecond: (NODES * SAS) / interval + RATE,
          duePerSecond: stats.due / seconds,
          churnFetches: stats.churnFetches,
          churnOps: stats.churnOps,
          failures,
          failureKinds: [...stats.failures.entries()].map(([k, v]) => `${v}× ${k}`),
          denials: [...denials.entries()].map(([k, v]) => `${v}× ${k}`),
          simCores: (sim.user + sim.system) / 1e6 / seconds,
          loopP99Ms,
          loadAverage,
          reviewsPerSecond: reviews / seconds,
          p50: lat.length ? pct(lat, 50) : NaN,
          p99: lat.length ? pct(lat, 99) : NaN,
          cpuUsPerCall: (cpuSeconds * 1e6) / Math.max(1, stats.ok),
          marginalUsPerCall: (Math.max(0, cpuSeconds - idleCores * seconds) * 1e6) / Math.max(1, stats.ok),
          caCores: cpuSeconds / seconds,
          idleCores,
        };
        results.push({ ...r, warmLine });
        process.stdout.write(
          `${caCount} CA: ${r.callsPerSecond.toFixed(1)} calls/s (steady-state expected ~${r.expectedPerSecond.toFixed(1)}; the schedule started ${r.duePerSecond.toFixed(1)}/s), ${r.failures} failed${r.failureKinds.length ? ` (${r.failureKinds.join('; ')})` : ''}, churn ${r.churnOps} pods -> ${r.churnFetches} new-identity fetches, TokenReviews ${r.reviewsPerSecond.toFixed(2)}/s (bound ~${((caCount * NODES) / TOKEN_CACHE).toFixed(2)}/s), latency p50 ${r.p50.toFixed(1)} ms p99 ${r.p99.toFixed(1)} ms, CA ${r.cpuUsPerCall.toFixed(0)} µs CPU/call, ${r.marginalUsPerCall.toFixed(0)} above idle (${r.caCores.toFixed(2)} cores; idle ${r.idleCores.toFixed(3)}); brokers + devcluster ${r.simCores.toFixed(2)} cores, event-loop delay p99 ${r.loopP99Ms.toFixed(0)} ms; machine load average ${r.loadAverage.toFixed(1)}${r.denials.length ? `; CA denial reasons: ${r.denials.join('; ')}` : ''}\n`,
        );
      } finally {
        await Promise.all(procs.map((p) => p.stop()));
      }
    }
  } finally {
    await env.close();
    await dir.remove();
  }
  report(results, intervalSeconds);
}

interface PhaseResult {
  readonly cas: number;
  readonly callsPerSecond: number;
  readonly expectedPerSecond: number;
  /** Fetches the schedule started in the window, per second (after a cold start: not the steady rate). */
  readonly duePerSecond: number;
  readonly churnFetches: number;
  readonly churnOps: number;
  readonly failures: number;
  readonly failureKinds: readonly string[];
  /** The CAs' logged reasons for refusing. */
  readonly denials: readonly string[];
  /** Cores this process (devcluster + simulated brokers) used in the window. */
  readonly simCores: number;
  /** This process's event-loop delay p99 in the window (ms). */
  readonly loopP99Ms: number;
  /** The machine's 1-minute load average (mean of the window's start and end). */
  readonly loadAverage: number;
  readonly reviewsPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly cpuUsPerCall: number;
  /** CPU per call above the CA's idle cost. */
  readonly marginalUsPerCall: number;
  readonly caCores: number;
  readonly idleCores: number;
  /** The warm-up: how the start went. */
  readonly warmLine?: string;
}

/** Why the CAs refused, by reason, from their own log lines (the reason behind the public "authentication failed"). */
function caDenials(logs: ReadonlyArray<readonly string[]>): Map<string, number> {
  const denials = new Map<string, number>();
  for (const lines of logs)
    for (const line of lines) {
      if (!line.includes('CreateCertificate denied') && !line.includes('CreateCertificate failed')) continue;
      const rec = JSON.parse(line) as { reason?: string };
      const reason = String(rec.reason ?? '?').replace(/[0-9a-f]{8}-[0-9a-f-]{27}/g, '<uid>').replace(/\b(w|ztunnel)-[\d-]+/g, '$1-…').slice(0, 120);
      if (!denials.has(reason)) process.stdout.write(`  first CA log line for ${reason}: ${line.slice(0, 600)}\n`);
      denials.set(reason, (denials.get(reason) ?? 0) + 1);
    }
  return denials;
}

/** Nodes one CA core sustains at TTL `ttl` with `sas` identities per node, from CPU per call. */
export function nodesPerCore(cpuUsPerCall: number, sas: number, renewalIntervalSeconds: number): number {
  return 1e6 / (cpuUsPerCall * (sas / renewalIntervalSeconds));
}

/** The command line of this run: the BENCH_CHURN_* variables set, then the script. */
function command(): string {
  const set = Object.keys(process.env).filter((k) => k.startsWith('BENCH_CHURN_') && k !== 'BENCH_CHURN_DOCS').sort();
  const vars = set.map((k) => `${k}=${process.env[k]}`).join(' ');
  return `${vars}${vars ? ' ' : ''}npm run bench:churn${LONG && !set.includes('BENCH_CHURN_LONG') ? ' -- --long' : ''}`;
}

function report(results: readonly PhaseResult[], intervalSeconds: (ttl: number) => number): void {
  const f1 = (n: number) => n.toFixed(1);
  const lines = [
    `| CA processes | CA calls/s (steady-state expected; started by the schedule in the window) | failed calls | pod churn: pods replaced → new-identity fetches | TokenReviews/s at the devcluster (bound: CAs × nodes / cache s) | latency p50 / p99 ms | CA CPU µs per call (above idle) | CA cores busy (idle) | brokers + devcluster process: cores, event-loop delay p99 ms | machine load average |`,
    `|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
    ...results.map(
      (r) =>
        `| ${r.cas} | ${f1(r.callsPerSecond)} (${f1(r.expectedPerSecond)}; ${f1(r.duePerSecond)}) | ${r.failures}${r.failureKinds.length ? ` (${r.failureKinds.join('; ')}; the CAs logged ${r.denials.join('; ')})` : ''} | ${r.churnOps} → ${r.churnFetches} | ${r.reviewsPerSecond.toFixed(2)} (${((r.cas * NODES) / TOKEN_CACHE).toFixed(2)}) | ${f1(r.p50)} / ${f1(r.p99)} | ${r.cpuUsPerCall.toFixed(0)} (${r.marginalUsPerCall.toFixed(0)}) | ${r.caCores.toFixed(2)} (${r.idleCores.toFixed(3)}) | ${r.simCores.toFixed(2)}, ${r.loopP99Ms.toFixed(0)} | ${r.loadAverage.toFixed(1)} |`,
    ),
    '',
    ...results.map((r) => `Warm-up with ${r.cas} CA${r.cas > 1 ? 's' : ''}, ${r.warmLine ?? '-'}.`),
    '',
    `Derived: nodes one CA core sustains, renewals only, 30 identities per node (= 1 s of CPU / (CPU per call × 30 / renewal interval)); all-in CPU per call, and above idle in brackets:`,
    '',
    `| CA processes | TTL 1 h (renewal ${intervalSeconds(3600).toFixed(0)} s) | TTL 24 h (renewal ${intervalSeconds(86_400).toFixed(0)} s) |`,
    `|---:|---:|---:|`,
    ...results.map((r) => {
      const at = (ttl: number) => `${nodesPerCore(r.cpuUsPerCall, 30, intervalSeconds(ttl)).toFixed(0)} (${nodesPerCore(Math.max(1, r.marginalUsPerCall), 30, intervalSeconds(ttl)).toFixed(0)})`;
      return `| ${r.cas} | ${at(3600)} | ${at(86_400)} |`;
    }),
  ];
  const note = [
    `Run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}, ${cpus().length} cores (shared), Node ${process.version}: \`${command()}\` — ${NODES} nodes x ${SAS} identities, TTL ${TTL} s (renewal every ~${intervalSeconds(TTL).toFixed(1)} s by the broker's refresh policy: half the lifetime from the backdated notBefore, ±10 %), ${RATE} pods/s replaced, CA token cache ${TOKEN_CACHE} s, ${WINDOW} s window after ${WARM_MIN_SECONDS === undefined ? 'one renewal interval' : `at least ${WARM_MIN_SECONDS} s`} of warm-up${COLD ? ' and the cold start (every identity fetched at once) having every identity held once' : ''}.`,
    `One process holds the devcluster and every simulated broker (own bound token, own TLS connection, the broker's FetchSlots/refreshDelay/retryDelay); the CA is \`certbroker ca\` in its own process(es), TLS, default signing workers. With 3 CAs each broker holds a connection to every CA and sends its calls round robin over them (as the broker does over the headless Service), so each CA reviews each broker token: the TokenReview bound is then 3 × nodes / cache s. Latency is seen by the brokers, so it includes this process's event-loop delay.`,
    `CPU per call = CA process CPU (all threads, /proc) in the window / calls answered; it includes the CA's idle cost, so at low call rates it overstates the marginal cost. Scaling to 1 h: the same calls happen at a 1/(renewal ratio) slower rate; CPU per call does not depend on the TTL, so nodes per core scale with the renewal interval (1 h → ${intervalSeconds(3600).toFixed(0)} s vs ${intervalSeconds(TTL).toFixed(1)} s here). TokenReviews stay about one per broker token per cache period whatever the TTL, as long as each broker calls at least once per period.`,
  ];
  writeDocSection({ root: ROOT, marker: 'churn', heading: 'Churn at scale (`npm run bench:churn`)', body: [...lines, '', ...note].join('\n'), file: process.env.BENCH_CHURN_DOCS });
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:churn failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
