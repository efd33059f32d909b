/**
 * `npm run bench:pod-index` (long; optional in `npm run bench`, see run-all.ts): the CA's pod
 * index at cluster scale. 150,000 realistic pods (~3 KB of JSON each) on 5,000 nodes plus one
 * ztunnel per node, in three processes so that each one's memory is its own:
 *
 * - cluster: a devcluster loaded with the pods (load time, heap and RSS per stored pod, the time
 *   of a first page, of a page deep in the list via its continue token, and of a whole paged
 *   walk of 500-pod pages);
 * - ca: the CA's PodInformer syncing from it (sync time; RSS and heap per indexed pod after a GC),
 *   then NodeAuthorizer.authorize per call, p50/p99, against that index and against an index of
 *   1,000 pods at the same pods-per-node density: first in a tight loop (authorize alone, the
 *   small index in L1), then in the call path (`inPathCosts`): authorize() timed inside
 *   CertificateService.createCertificate, with the real TokenReview authenticator and token
 *   cache against the devcluster (a bound token per node agent; the 1,000-pod side is a second
 *   devcluster in the cluster process, synced by an informer of its own), the self-signed signer on 2
 *   signing workers, burst and random calls 16 in flight, rounds alternating the two indexes —
 *   where the rest of each call evicts the caches at any size. No TLS or HTTP/2. Per size and
 *   pattern also the calls issued (every one must be) and the CA's CPU per call;
 * - baseline: a fresh process holding the same tuples as a Map of plain objects (RSS per pod).
 *
 * `--pods N --nodes N` shrink it for a smoke run; `--write-docs` updates docs/benchmarks.md.
 *
 * `--ab <dist> [--pairs N] [--prof-dir D]`: an A/B of the sync alone instead. One devcluster is
 * loaded once; then pairs of sync-only CA processes, one of this build and one of the build in
 * `<dist>` (another worktree's dist/, any version with ca/index.js's PodInformer), in an order
 * that flips every pair so the machine's drift falls on both; each reports its wall time, its
 * CPU and the load average, and the end prints the CPU ratios. `--prof-dir` adds --cpu-prof.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createInterface } from 'node:readline';
import { CoreV1Api, KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { startDevCluster } from '../src/devcluster/index.js';
import * as caModule from '../src/ca/index.js';
import { CompactPodIndex } from '../src/ca/index.js';
import { InMemoryPodIndex, makeCaller, NodeAuthorizer, PodInformer, toPodInfo, type Caller, type PodIndex, type PodInfo } from '../src/ca/index.js';
import { silentLogger } from '../src/core/log.js';
import { systemClock } from '../src/core/clock.js';
import { Secret } from '../src/core/secret.js';
import { createCsr, generateKeyPair } from '../src/pki/index.js';
import type { IstioCertificateRequest } from '../src/protocol/istio-ca.js';
import { bearerMetadata, impersonatingRequest, startInProcessCa } from './in-process-ca.js';
import { realisticPod, nodeName, podNode, podUid, type ClusterShape } from '../test/support/realistic-pods.js';
import { median, pct, writeDocSection } from './report.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const MiB = 1024 * 1024;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const PODS = arg('pods', 150_000);
const NODES = arg('nodes', 5_000);
const SHAPE: ClusterShape = { pods: PODS, nodes: NODES, namespaces: 200, accounts: 20 };
/** The 1,000-pod cluster the large one is compared with: the same pods per node. */
const SMALL_SHAPE: ClusterShape = { pods: 1000, nodes: Math.max(1, Math.round((1000 * NODES) / PODS)), namespaces: 200, accounts: 20 };
/** Where the cluster child writes the small cluster's kubeconfig, beside the large one's. */
const smallKubeconfig = (kubeconfigPath: string) => `${kubeconfigPath}.small`;
const CLUSTER_HEAP_MB = 8192;
const CA_HEAP_MB = 1024;

function gc(): void {
  (globalThis as { gc?: () => void }).gc?.();
  (globalThis as { gc?: () => void }).gc?.();
}

function mem(): { rss: number; heap: number } {
  gc();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed + m.external + m.arrayBuffers };
}

function ztunnel(n: number): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: 'istio-system', name: `ztunnel-${n}`, uid: podUid(0x7000000 + n) },
    spec: { serviceAccountName: 'ztunnel', nodeName: nodeName(n), containers: [{ name: 'istio-proxy', image: 'istio/ztunnel' }] },
    status: { phase: 'Running' },
  };
}

/** The cluster process: loads the pods, reports, serves until stdin closes. */
/** A devcluster holding the pods of `shape` and one ztunnel per node (and the node agents' account, for TokenRequests). */
async function loadedCluster(shape: ClusterShape): Promise<{ cluster: Awaited<ReturnType<typeof startDevCluster>>; loadMs: number }> {
  const cluster = await startDevCluster({ historyLimit: 1000 });
  const namespaces = Array.from({ length: shape.namespaces }, (_, i) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: `team-${i}-prod` } }));
  await cluster.apply([...namespaces, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'istio-system' } }]);
  await cluster.apply([{ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: 'istio-system', name: 'ztunnel' } }]);
  const t0 = performance.now();
  for (let i = 0; i < shape.pods; i += 1000) {
    const batch = [];
    for (let j = i; j < Math.min(shape.pods, i + 1000); j++) batch.push({ apiVersion: 'v1', kind: 'Pod', ...realisticPod(j, shape) });
    await cluster.apply(batch);
  }
  await cluster.apply(Array.from({ length: shape.nodes }, (_, n) => ztunnel(n)));
  return { cluster, loadMs: performance.now() - t0 };
}

async function clusterMode(kubeconfigPath: string): Promise<void> {
  const before = mem();
  const { cluster, loadMs } = await loadedCluster(SHAPE);
  const loaded = mem();
  await cluster.writeKubeconfig(kubeconfigPath);
  // Pages over HTTPS through node's own client (the devcluster's CA is not in fetch's trust).
  const https = await import('node:https');
  const agent = new https.Agent({ ca: cluster.caCertPem, keepAlive: true });
  const page = (query: string) =>
    new Promise<{ ms: number; items: number; cont: string | undefined; bytes: number }>((resolve, reject) => {
      const started = performance.now();
      https
        .get(`${cluster.url}/api/v1/pods?${query}`, { agent, headers: { authorization: `Bearer ${cluster.adminToken}` } }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const body = JSON.parse(text) as { items: unknown[]; metadata: { continue?: string } };
            resolve({ ms: performance.now() - started, items: body.items.length, cont: body.metadata.continue, bytes: text.length });
          });
        })
        .on('error', reject);
    });
  const first = await page('limit=500');
  let walkMs = 0;
  let pages = 0;
  let deepMs = 0;
  let cont: string | undefined;
  let bytes = 0;
  do {
    const p = await page(`limit=500${cont ? `&continue=${cont}` : ''}`);
    walkMs += p.ms;
    bytes += p.bytes;
    pages++;
    if (pages === Math.ceil((PODS + NODES) / 1000)) deepMs = p.ms;
    cont = p.cont;
  } while (cont !== undefined);
  agent.destroy();
  const served = mem();
  // The in-path rounds' 1,000-pod side is a cluster of its own, synced by an informer as the large one is (started after the large one's memory was read).
  const { cluster: small } = await loadedCluster(SMALL_SHAPE);
  await small.writeKubeconfig(smallKubeconfig(kubeconfigPath));
  const stored = PODS + NODES;
  process.stdout.write(
    `${JSON.stringify({
      url: cluster.url,
      loadMs,
      storedPods: stored,
      heapPerPod: (loaded.heap - before.heap) / stored,
      rssPerPod: (loaded.rss - before.rss) / stored,
      rssMiB: loaded.rss / MiB,
      rssAfterWalkMiB: served.rss / MiB,
      firstPageMs: first.ms,
      deepPageMs: deepMs,
      walkMs,
      pages,
      listBytes: bytes,
    })}\n`,
  );
  // Serve the CA until the parent closes stdin.
  process.stdin.resume();
  await new Promise((r) => process.stdin.on('end', r));
  await small.close();
  await cluster.close();
}

interface Call {
  readonly caller: Caller;
  readonly identity: string;
}

/** The node agent of node `n` as the token cache hands it out (the UID as the index has it: the devcluster's admission gives created pods their own). */
function agent(index: PodIndex, n: number): Caller {
  const uid = index.getPod({ namespace: 'istio-system', name: `ztunnel-${n}` })?.uid ?? '';
  return makeCaller({ namespace: 'istio-system', serviceAccount: 'ztunnel', podName: `ztunnel-${n}`, podUid: uid, clusterId: 'Kubernetes', authenticator: 'tokenreview' });
}

const identityOf = (p: PodInfo) => `spiffe://cluster.local/ns/${p.namespace}/sa/${p.serviceAccountName}`;
/** Pods that authorize (a Failed or Succeeded pod alone on its node is refused: another path). */
const authorizes = (p: PodInfo) => p.phase === 'Running' || p.phase === 'Pending';
const CALLS = 2000;

/** Random callers: pod i spread over the cluster, asked for by its node's agent; a Caller object per call (each one noted after its first call). */
function randomCalls(index: PodIndex, shape: ClusterShape): Call[] {
  const out: Call[] = [];
  for (let k = 0; out.length < CALLS; k++) {
    const i = Math.floor((k * 7919) % shape.pods);
    const p = toPodInfo(realisticPod(i, shape) as V1Pod)!;
    if (authorizes(p)) out.push({ caller: agent(index, podNode(i, shape.nodes)), identity: identityOf(p) });
  }
  return out;
}

/** Bursts: node after node (spread over the cluster), its agent asks for the identities of all its node's pods in a row, as a broker does for its workloads; one Caller per node. */
function burstCalls(index: PodIndex, shape: ClusterShape): Call[] {
  const byNode = new Map<number, PodInfo[]>();
  for (let i = 0; i < shape.pods; i++) {
    const p = toPodInfo(realisticPod(i, shape) as V1Pod)!;
    const n = podNode(i, shape.nodes);
    if (authorizes(p)) (byNode.get(n) ?? byNode.set(n, []).get(n)!).push(p);
  }
  const out: Call[] = [];
  for (let k = 0; out.length < CALLS; k++) {
    const n = (k * 7919) % shape.nodes;
    const caller = agent(index, n);
    for (const p of byNode.get(n) ?? []) if (out.length < CALLS) out.push({ caller, identity: identityOf(p) });
  }
  return out;
}

/**
 * Many identities: one call per account of a cluster with ~10,000 (namespace, service account)
 * pairs (more than the 4,096 parsed identities the authorizer once kept and cleared when full),
 * each asked for by the agent of a node one of its pods runs on, cycled in the same order.
 */
function wideCalls(index: PodIndex, shape: ClusterShape): Call[] {
  const seen = new Set<string>();
  const out: Call[] = [];
  for (let i = 0; i < shape.pods; i++) {
    const p = toPodInfo(realisticPod(i, shape) as V1Pod)!;
    const id = identityOf(p);
    if (!authorizes(p) || seen.has(id)) continue;
    seen.add(id);
    out.push({ caller: agent(index, podNode(i, shape.nodes)), identity: id });
  }
  return out;
}

function authorizer(pods: PodIndex): NodeAuthorizer {
  return new NodeAuthorizer({ trustedNodeAccounts: ['istio-system/ztunnel'], trustDomains: ['cluster.local'], pods });
}

type Pattern = 'burst' | 'random' | 'cold' | 'wide';
const PATTERNS: ReadonlyArray<Exclude<Pattern, 'wide'>> = ['burst', 'random', 'cold'];
interface Cost {
  readonly p50: number;
  readonly p99: number;
  readonly allowed: number;
  /** Distinct identities asked for, and full SPIFFE parses per measured call (parsed-identity cache misses). */
  readonly identities: number;
  readonly parsesPerCall: number;
}

/**
 * authorize() per call on each index and call pattern, p50/p99 in µs: warmed up first, then
 * measured in alternating rounds so JIT state and machine noise fall on all alike. `cold`: the
 * random calls, each from a new Caller object (a token's first call: no note yet).
 */
function authzCosts(sets: ReadonlyArray<{ pods: PodIndex; shape: ClusterShape; patterns: readonly Pattern[] }>): Array<Partial<Record<Pattern, Cost>>> {
  const runs = sets.flatMap((s, set) => {
    const lists = {} as Record<Pattern, Call[]>;
    for (const pattern of s.patterns) {
      if (pattern === 'wide') lists.wide = wideCalls(s.pods, s.shape);
      else if (pattern === 'burst') lists.burst = burstCalls(s.pods, s.shape);
      else lists[pattern] = lists.random ?? lists.cold ?? randomCalls(s.pods, s.shape);
    }
    // One authorizer per pattern: the wide row's parses are its own.
    return s.patterns.map((pattern) => ({ set, pattern, authz: authorizer(s.pods), calls: lists[pattern], samples: [] as number[], allowed: 0, parses: 0 }));
  });
  const call = (r: (typeof runs)[number], c: Call): boolean => {
    try {
      r.authz.authorize(c.caller, c.identity);
      return true;
    } catch {
      return false;
    }
  };
  const copies = (r: (typeof runs)[number]): readonly Call[] => (r.pattern === 'cold' ? r.calls.map((c) => ({ caller: makeCaller(c.caller), identity: c.identity })) : r.calls);
  for (const r of runs) for (let k = 0; k < 3; k++) for (const c of copies(r)) call(r, c);
  for (let round = 0; round < 10; round++) {
    for (const r of runs) {
      const parses0 = r.authz.identityCache.parses;
      for (const c of copies(r)) {
        const t = process.hrtime.bigint();
        const ok = call(r, c);
        r.samples.push(Number(process.hrtime.bigint() - t) / 1000);
        if (ok) r.allowed++;
      }
      r.parses += r.authz.identityCache.parses - parses0;
    }
  }
  return sets.map((_, set) => {
    const out: Partial<Record<Pattern, Cost>> = {};
    for (const r of runs.filter((x) => x.set === set)) {
      r.samples.sort((a, b) => a - b);
      const identities = new Set(r.calls.map((c) => c.identity)).size;
      out[r.pattern] = { p50: pct(r.samples, 50), p99: pct(r.samples, 99), allowed: r.allowed / r.samples.length, identities, parsesPerCall: r.parses / r.samples.length };
    }
    return out;
  });
}

/** A NodeAuthorizer that times its own authorize() (ns per call into `samples`) while `recording`: the bench's only change to the call path. */
class TimedAuthorizer extends NodeAuthorizer {
  recording = false;
  samples: number[] = [];

  override authorize(caller: Caller, requestedIdentity: string): ReturnType<NodeAuthorizer['authorize']> {
    if (!this.recording) return super.authorize(caller, requestedIdentity);
    const t = process.hrtime.bigint();
    try {
      return super.authorize(caller, requestedIdentity);
    } finally {
      this.samples.push(Number(process.hrtime.bigint() - t));
    }
  }
}

type PathPattern = 'burst' | 'random';
const PATH_PATTERNS: readonly PathPattern[] = ['burst', 'random'];
/** Calls in flight at once in the in-path rounds, measured rounds after the warm-up one, distinct CSRs. */
const PATH_INFLIGHT = 16;
const PATH_ROUNDS = 6;
const PATH_CSRS = 8;

interface PathCost {
  /** authorize() per call inside createCertificate, µs. */
  readonly p50: number;
  readonly p99: number;
  readonly mean: number;
  /** authorize() calls timed (one per call that reached it). */
  readonly timed: number;
  /** Calls issued / refused over the measured rounds (every call should be issued). */
  readonly issued: number;
  readonly failed: number;
  /** The first refusal's code and message, when there was one. */
  readonly firstError?: string;
  /** This process's CPU (all threads: main, signing workers, GC, libuv) over the measured rounds per issued call, µs. */
  readonly cpuUsPerCall: number;
}

interface PathCall {
  readonly request: IstioCertificateRequest;
  readonly metadata: { get(key: string): string[] };
}

/** One (side, pattern) of the in-path rounds and what its measured rounds gathered. */
interface PathRun {
  readonly side: number;
  readonly pattern: PathPattern;
  readonly authorizer: TimedAuthorizer;
  readonly service: caModule.CertificateService;
  readonly calls: readonly PathCall[];
  readonly samples: number[];
  issued: number;
  failed: number;
  firstError: string | undefined;
  cpuUs: number;
}

/** `calls` through `issue` with PATH_INFLIGHT in flight (closed loops), each call once. */
async function closedLoops(calls: readonly PathCall[], issue: (c: PathCall) => Promise<{ cert_chain: readonly string[] }>): Promise<{ issued: number; failed: number; firstError?: string }> {
  let next = 0;
  let issued = 0;
  let failed = 0;
  let firstError: string | undefined;
  const loop = async () => {
    while (next < calls.length) {
      const c = calls[next++]!;
      try {
        if ((await issue(c)).cert_chain.length > 0) issued++;
        else failed++;
      } catch (err) {
        failed++;
        firstError ??= err instanceof Error ? `${(err as { code?: string }).code ?? err.name}: ${err.message}` : String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: PATH_INFLIGHT }, loop));
  return firstError === undefined ? { issued, failed } : { issued, failed, firstError };
}

/**
 * authorize() in the CA's real call path: CertificateService.createCertificate with the real
 * TokenReview authenticator and token cache (against the devcluster, over the bench's
 * kubeconfig), the self-signed signer on 2 signing workers, and per side a TimedAuthorizer over
 * that side's index. Each side's node agents have their own bound tokens (TokenRequest, audience
 * istio-ca), so the token cache hands each side its own Caller objects and one side's pod notes
 * never displace the other's. The calls are the tight loop's burst and random (node, identity)
 * pairs; after the token cache is warmed (one review per token) and one unrecorded round, rounds
 * alternate the sides' order. No TLS, no HTTP/2.
 */
async function inPathCosts(sides: ReadonlyArray<{ pods: PodIndex; shape: ClusterShape; kubeconfigPath: string }>): Promise<{ costs: Array<Record<PathPattern, PathCost>>; tokens: number; tokenMs: number; reviewsInRounds: number; load: [number, number] }> {
  // Each side's cluster: its own TokenReview authenticator chain and token cache in the one assembly.
  const configs = sides.map((s, side) => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(s.kubeconfigPath);
    return { id: side === 0 ? 'Kubernetes' : `side-${side}`, kubeConfig, audiences: ['istio-ca'], tokenReview: true };
  });
  // Token cache of an hour (the CA's default is 60 s): no review falls due inside the rounds.
  const ca = await startInProcessCa(caModule, configs[0]!, { clock: systemClock, logger: silentLogger, tokenCacheSeconds: 3600, more: configs.slice(1) });
  try {
    const csrs: string[] = [];
    for (let i = 0; i < PATH_CSRS; i++) csrs.push(createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: 'spiffe://cluster.local/ns/x/sa/x' }).pem);
    const t0 = performance.now();
    let tokens = 0;
    const runs: PathRun[] = [];
    for (const [side, s] of sides.entries()) {
      // The assembly's own informers are not started: its authenticator chains alone are used (they do not need them).
      const config = configs[side]!;
      const authn = ca.clusters.auth.get(config.id)!.authn;
      const core = config.kubeConfig.makeApiClient(CoreV1Api);
      const authorizer = new TimedAuthorizer({ trustedNodeAccounts: ['istio-system/ztunnel'], trustDomains: ['cluster.local'], pods: s.pods });
      // Calls carry no clusterid: the default cluster's entry is this side's.
      const service = ca.service(new Map([[configs[0]!.id, { id: config.id, authn, authorizer }]]));
      const lists: Record<PathPattern, Call[]> = { burst: burstCalls(s.pods, s.shape), random: randomCalls(s.pods, s.shape) };
      // One bound token per node agent of this side, bound to its pod by the UID its index has.
      const agents = new Map<string, Caller>();
      for (const p of PATH_PATTERNS) for (const c of lists[p]) agents.set(c.caller.podName!, c.caller);
      const bearer = new Map<string, { get(key: string): string[] }>();
      const pending = [...agents.values()];
      await Promise.all(
        Array.from({ length: PATH_INFLIGHT }, async () => {
          for (let a = pending.pop(); a !== undefined; a = pending.pop()) {
            const tr = await core.createNamespacedServiceAccountToken({
              namespace: 'istio-system',
              name: 'ztunnel',
              body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: ['istio-ca'], expirationSeconds: 3600, boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: a.podName!, uid: a.podUid! } } },
            });
            const token = tr.status!.token;
            // Warms the token cache: this token's one TokenReview.
            await authn.authenticate(new Secret(token));
            bearer.set(a.podName!, bearerMetadata(token));
          }
        }),
      );
      tokens += bearer.size;
      for (const pattern of PATH_PATTERNS) {
        const calls = lists[pattern].map((c, k) => ({ request: impersonatingRequest(csrs[k % csrs.length]!, c.identity), metadata: bearer.get(c.caller.podName!)! }));
        runs.push({ side, pattern, authorizer, service, calls, samples: [], issued: 0, failed: 0, firstError: undefined, cpuUs: 0 });
      }
    }
    const tokenMs = performance.now() - t0;
    const round = async (r: PathRun, record: boolean) => {
      r.authorizer.samples = r.samples;
      r.authorizer.recording = record;
      const cpu0 = process.cpuUsage();
      // A call's end as the HTTP/2 transports hand it over (an AbortSignal only if asked for).
      const out = await closedLoops(r.calls, (c) => r.service.createCertificate(c.request, c.metadata, new caModule.LazyCallAbort()));
      const cpu = process.cpuUsage(cpu0);
      r.authorizer.recording = false;
      // A refusal in the warm-up is one of the measured calls' too: counted, not hidden.
      r.failed += out.failed;
      r.firstError ??= out.firstError;
      if (!record) return;
      r.cpuUs += cpu.user + cpu.system;
      r.issued += out.issued;
    };
    // TokenReviews sent (cache misses and background refreshes): none should fall in the measured rounds.
    const reviews = async () => (await ca.metrics.tokenReviewCache.get()).values.filter((v) => v.labels.result === 'miss' || v.labels.result === 'refresh').reduce((a, v) => a + v.value, 0);
    for (const r of runs) await round(r, false);
    const load0 = loadavg()[0]!;
    const reviews0 = await reviews();
    for (let k = 0; k < PATH_ROUNDS; k++) for (const r of k % 2 === 0 ? runs : [...runs].reverse()) await round(r, true);
    const reviewsInRounds = (await reviews()) - reviews0;
    const load: [number, number] = [load0, loadavg()[0]!];
    const costs = sides.map((_, side) => {
      const out = {} as Record<PathPattern, PathCost>;
      for (const r of runs.filter((x) => x.side === side)) {
        const us = r.samples.map((ns) => ns / 1000).sort((a, b) => a - b);
        const cost = { p50: pct(us, 50), p99: pct(us, 99), timed: us.length, mean: us.reduce((a, b) => a + b, 0) / Math.max(1, us.length), issued: r.issued, failed: r.failed, cpuUsPerCall: r.cpuUs / Math.max(1, r.issued) };
        out[r.pattern] = r.firstError === undefined ? cost : { ...cost, firstError: r.firstError };
      }
      return out;
    });
    return { costs, tokens, tokenMs, reviewsInRounds, load };
  } finally {
    await ca.close();
  }
}

/**
 * The tight-loop rows: authzCosts over the synced informer, the 1,000-pod compact index and the
 * map and many-identity indexes built for them here (so that those are garbage once it returns).
 */
function tightLoop(informer: PodInformer) {
  const smallShape = SMALL_SHAPE;
  const fill = <I extends { upsert(p: ReturnType<typeof toPodInfo> & object): void }>(idx: I, count: number, shape: ClusterShape): I => {
    for (let i = 0; i < count; i++) idx.upsert(toPodInfo(realisticPod(i, shape) as V1Pod)!);
    for (let n = 0; n < shape.nodes; n++) idx.upsert(toPodInfo(ztunnel(n) as V1Pod)!);
    return idx;
  };
  const small = fill(new CompactPodIndex(), 1000, smallShape);
  // The map-based index this replaced (InMemoryPodIndex), at both sizes, for the same calls.
  const oldBig = fill(new InMemoryPodIndex(), PODS, SHAPE);
  const oldSmall = fill(new InMemoryPodIndex(), 1000, smallShape);
  // Many identities (namespaces x accounts coprime: ~10,000 distinct pairs at full size), compact index at both sizes.
  const wideShape: ClusterShape = { ...SHAPE, namespaces: 499 };
  const wideSmallShape: ClusterShape = { ...smallShape, namespaces: 499 };
  const wideBig = fill(new CompactPodIndex(), PODS, wideShape);
  const wideSmall = fill(new CompactPodIndex(), 1000, wideSmallShape);
  const load0 = loadavg()[0]!;
  const [big, little, mapBig, mapSmall, manyBig, manySmall] = authzCosts([
    { pods: informer, shape: SHAPE, patterns: PATTERNS },
    { pods: small, shape: smallShape, patterns: PATTERNS },
    { pods: oldBig, shape: SHAPE, patterns: PATTERNS },
    { pods: oldSmall, shape: smallShape, patterns: PATTERNS },
    { pods: wideBig, shape: wideShape, patterns: ['wide'] },
    { pods: wideSmall, shape: wideSmallShape, patterns: ['wide'] },
  ]);
  const authzLoad = [load0, loadavg()[0]!];
  return { report: { authz150k: big, authz1k: little, map150k: mapBig, map1k: mapSmall, wide150k: manyBig!.wide, wide1k: manySmall!.wide, authzLoad, timerFloor: timerFloor() } };
}

/** What timing one call costs by itself: an hrtime pair around an empty call, as authzCosts times each call (µs p50/p99). */
let timerSink = 0;
function timerFloor(): { p50: number; p99: number } {
  const samples: number[] = [];
  const empty = (k: number) => {
    timerSink ^= k;
  };
  for (let k = 0; k < 20_000; k++) {
    const t = process.hrtime.bigint();
    empty(k);
    samples.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  samples.sort((a, b) => a - b);
  return { p50: pct(samples, 50), p99: pct(samples, 99) };
}

/** Starts `Informer` against the cluster of `kubeconfigPath` and waits for its first sync: wall and CPU ms of it. */
async function timedSync(Informer: typeof PodInformer, kubeconfigPath: string): Promise<{ informer: PodInformer; syncMs: number; syncCpuMs: number }> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const informer = new Informer({ kubeConfig: kc, clock: (await import('../src/core/clock.js')).systemClock, logger: silentLogger });
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  informer.start();
  await informer.waitForSync();
  const syncMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  return { informer, syncMs, syncCpuMs: (cpu.user + cpu.system) / 1000 };
}

/** The CA process: syncs the PodInformer from the cluster, then measures authorization (tight loop, then in the call path). */
async function caMode(kubeconfigPath: string): Promise<void> {
  const before = mem();
  const { informer, syncMs, syncCpuMs } = await timedSync(PodInformer, kubeconfigPath);
  let peakRss = process.memoryUsage().rss;
  const synced = mem();
  peakRss = Math.max(peakRss, synced.rss);
  const indexed = informer.size;
  const { report } = tightLoop(informer);
  // The in-path rounds compare like with like: the 1,000-pod side is an informer synced from a devcluster of its own too.
  const { informer: smallInformer } = await timedSync(PodInformer, smallKubeconfig(kubeconfigPath));
  const inPath = await inPathCosts([
    { pods: informer, shape: SHAPE, kubeconfigPath },
    { pods: smallInformer, shape: SMALL_SHAPE, kubeconfigPath: smallKubeconfig(kubeconfigPath) },
  ]);
  const after = process.memoryUsage().rss;
  await smallInformer.stop();
  await informer.stop();
  process.stdout.write(
    `${JSON.stringify({ indexed, syncMs, syncCpuMs, rssPerPod: (synced.rss - before.rss) / indexed, heapPerPod: (synced.heap - before.heap) / indexed, rssMiB: synced.rss / MiB, peakRssMiB: peakRss / MiB, ...report, inPath150k: inPath.costs[0], inPath1k: inPath.costs[1], inPathTokens: inPath.tokens, inPathTokenMs: inPath.tokenMs, inPathReviews: inPath.reviewsInRounds, inPathLoad: inPath.load, rssAfterInPathMiB: after / MiB })}\n`,
  );
}

/** The baseline process: the same tuples as a Map of plain objects. */
function baselineMode(): void {
  const before = mem();
  const map = new Map<string, unknown>();
  const nodes = new Map<string, unknown[]>();
  for (let i = 0; i < PODS + NODES; i++) {
    const raw = i < PODS ? realisticPod(i, SHAPE) : ztunnel(i - PODS);
    const p = toPodInfo(JSON.parse(JSON.stringify(raw)) as V1Pod)!;
    // Fresh strings per pod, as decoding each pod's JSON makes them.
    const t = { namespace: p.namespace, name: p.name, uid: p.uid, serviceAccountName: p.serviceAccountName, nodeName: p.nodeName, phase: p.phase };
    map.set(`${t.namespace}/${t.name}`, t);
    let l = nodes.get(t.nodeName);
    if (!l) nodes.set(t.nodeName, (l = []));
    l.push(t);
  }
  const after = mem();
  process.stdout.write(`${JSON.stringify({ pods: map.size, rssPerPod: (after.rss - before.rss) / map.size, heapPerPod: (after.heap - before.heap) / map.size })}\n`);
}

function child(mode: string, heapMb: number, extra: string[] = [], nodeFlags: string[] = []): { lines: AsyncIterableIterator<string>; close: () => void; done: Promise<number | null> } {
  const p = spawn(process.execPath, [`--max-old-space-size=${heapMb}`, '--expose-gc', ...nodeFlags, fileURLToPath(import.meta.url), '--mode', mode, '--pods', String(PODS), '--nodes', String(NODES), ...extra], { stdio: ['pipe', 'pipe', 'inherit'] });
  const rl = createInterface({ input: p.stdout });
  return { lines: rl[Symbol.asyncIterator](), close: () => p.stdin.end(), done: new Promise((r) => p.on('exit', (code) => r(code))) };
}

async function firstLine(it: AsyncIterableIterator<string>): Promise<Record<string, unknown>> {
  const { value, done } = await it.next();
  if (done) throw new Error('the child ended without a report');
  return JSON.parse(value as string) as Record<string, unknown>;
}

interface SyncParts {
  readonly PodInformer: typeof PodInformer;
}

/** The sync-only CA process: the PodInformer of the build in `dist` (default: this one) lists the cluster once. */
async function syncMode(kubeconfigPath: string, dist: string): Promise<void> {
  const { PodInformer: Informer } = (await import(pathToFileURL(join(dist, 'src', 'ca', 'index.js')).href)) as SyncParts;
  const load = loadavg()[0]!;
  const { informer, syncMs, syncCpuMs } = await timedSync(Informer, kubeconfigPath);
  const indexed = informer.size;
  await informer.stop();
  process.stdout.write(`${JSON.stringify({ indexed, syncMs, syncCpuMs, load: [load, loadavg()[0]!] })}\n`);
}

/** `--ab <dist>`: alternating pairs of sync-only processes of this build and of `<dist>` against the one loaded cluster. */
async function syncAb(kubeconfig: string, baseDist: string): Promise<void> {
  const pairs = arg('pairs', 3);
  const profDir = process.argv.includes('--prof-dir') ? process.argv[process.argv.indexOf('--prof-dir') + 1]! : undefined;
  const prof = profDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profDir}`];
  const builds = [
    { name: 'base', dist: resolve(baseDist) },
    { name: 'this', dist: join(here, '..') },
  ];
  const rows: Array<Record<string, Record<string, unknown>>> = [];
  for (let pair = 0; pair < pairs; pair++) {
    const row: Record<string, Record<string, unknown>> = {};
    for (const b of pair % 2 === 0 ? builds : [...builds].reverse()) {
      const p = child('sync', CA_HEAP_MB, ['--kubeconfig', kubeconfig, '--dist', b.dist], prof);
      row[b.name] = await firstLine(p.lines);
      await p.done;
      const r = row[b.name]!;
      const [l0, l1] = r.load as [number, number];
      console.log(`pair ${pair + 1} ${b.name}: synced ${r.indexed} pods in ${f1((r.syncMs as number) / 1000)} s, CA CPU ${f2((r.syncCpuMs as number) / 1000)} s (load ${f1(l0)} -> ${f1(l1)})`);
    }
    rows.push(row);
  }
  const ratios = rows.map((r) => (r.this!.syncCpuMs as number) / (r.base!.syncCpuMs as number));
  const walls = rows.map((r) => (r.this!.syncMs as number) / (r.base!.syncMs as number));
  console.log(`this / base per pair: CPU ${ratios.map(f2).join(' ')} (median ${f2(median(ratios))}); wall ${walls.map(f2).join(' ')} (median ${f2(median(walls))})`);
}

const f0 = (x: unknown) => (x as number).toFixed(0);
const f1 = (x: unknown) => (x as number).toFixed(1);
const f2 = (x: unknown) => (x as number).toFixed(2);

async function main(): Promise<void> {
  const i = process.argv.indexOf('--mode');
  const mode = i >= 0 ? process.argv[i + 1] : undefined;
  if (mode === 'cluster') return clusterMode(process.argv[process.argv.indexOf('--kubeconfig') + 1]!);
  if (mode === 'ca') return caMode(process.argv[process.argv.indexOf('--kubeconfig') + 1]!);
  if (mode === 'baseline') return baselineMode();
  if (mode === 'sync') return syncMode(process.argv[process.argv.indexOf('--kubeconfig') + 1]!, process.argv[process.argv.indexOf('--dist') + 1]!);

  const dir = mkdtempSync(join(tmpdir(), 'bench-pod-index-'));
  const kubeconfig = join(dir, 'kubeconfig');
  try {
    console.log(`pod index: ${PODS} pods on ${NODES} nodes (+${NODES} ztunnels); cluster --max-old-space-size=${CLUSTER_HEAP_MB}, CA ${CA_HEAP_MB}`);
    const cluster = child('cluster', CLUSTER_HEAP_MB, ['--kubeconfig', kubeconfig]);
    const c = await firstLine(cluster.lines);
    if (process.argv.includes('--ab')) {
      await syncAb(kubeconfig, process.argv[process.argv.indexOf('--ab') + 1]!);
      cluster.close();
      await cluster.done;
      return;
    }
    console.log(`devcluster: load ${f1((c.loadMs as number) / 1000)} s, ${f0(c.heapPerPod)} B heap / ${f0(c.rssPerPod)} B RSS per stored pod (RSS ${f0(c.rssMiB)} MiB); first page of 500 ${f1(c.firstPageMs)} ms, a page halfway ${f1(c.deepPageMs)} ms, ${c.pages} pages in ${f1((c.walkMs as number) / 1000)} s (${f0((c.listBytes as number) / MiB)} MiB of JSON)`);
    const ca = child('ca', CA_HEAP_MB, ['--kubeconfig', kubeconfig]);
    const r = await firstLine(ca.lines);
    await ca.done;
    cluster.close();
    await cluster.done;
    const base = child('baseline', 4096);
    const b = await firstLine(base.lines);
    await base.done;
    const a150 = r.authz150k as Record<Pattern, Cost>;
    const a1 = r.authz1k as Record<Pattern, Cost>;
    const m150 = r.map150k as Record<Pattern, Cost>;
    const m1 = r.map1k as Record<Pattern, Cost>;
    const w150 = r.wide150k as Cost;
    const w1 = r.wide1k as Cost;
    const [l0, l1] = r.authzLoad as [number, number];
    const p150 = r.inPath150k as Record<PathPattern, PathCost>;
    const p1 = r.inPath1k as Record<PathPattern, PathCost>;
    const [pl0, pl1] = r.inPathLoad as [number, number];
    const refused = PATH_PATTERNS.flatMap((p) => [[`${PODS} pods`, p, p150[p]] as const, ['1000 pods', p, p1[p]] as const]).filter(([, , x]) => x.failed > 0);
    const ratio = (a: Pick<Cost, 'p50' | 'p99'>, b: Pick<Cost, 'p50' | 'p99'>) => `${f2(a.p50 / b.p50)}x / ${f2(a.p99 / b.p99)}x`;
    const costs = (a: Pick<Cost, 'p50' | 'p99'>) => `${f2(a.p50)} / ${f2(a.p99)} µs`;
    const wideLine = `many identities (one call per account, cycled; compact index): ${costs(w150)} p50/p99 with ${w150.identities} identities at ${PODS} pods vs ${costs(w1)} with ${w1.identities} at 1000 pods = ${ratio(w150, w1)}; full SPIFFE parses per measured call ${f2(w150.parsesPerCall)} / ${f2(w1.parsesPerCall)} (allowed ${f2(w150.allowed)} / ${f2(w1.allowed)})`;
    const share = (a: PathCost) => `${f1((100 * a.mean) / a.cpuUsPerCall)} %`;
    const pathLine = (p: PathPattern) =>
      `authorize in the call path, ${p}: ${costs(p150[p])} p50/p99 at ${PODS} pods vs ${costs(p1[p])} at 1000 pods = ${ratio(p150[p], p1[p])}; tight loop ${ratio(a150[p], a1[p])} (issued ${p150[p].issued} / ${p1[p].issued}, refused ${p150[p].failed} / ${p1[p].failed}; CA CPU per call ${f0(p150[p].cpuUsPerCall)} / ${f0(p1[p].cpuUsPerCall)} µs, authorize's mean ${share(p150[p])} / ${share(p1[p])} of it)`;
    const WHAT: Record<Exclude<Pattern, 'wide'>, string> = {
      burst: "a node agent's burst: its node's pods' identities in a row, node after node (noted caller)",
      random: 'random callers: each call another node (noted callers)',
      cold: "a caller's first call (new Caller object: no note), random nodes",
    };
    const lines = [
      `CA: synced ${r.indexed} pods in ${f1((r.syncMs as number) / 1000)} s (CA CPU ${f1((r.syncCpuMs as number) / 1000)} s); ${f0(r.rssPerPod)} B RSS / ${f0(r.heapPerPod)} B heap per indexed pod (RSS ${f0(r.rssMiB)} MiB, peak ${f0(r.peakRssMiB)} MiB)`,
      `baseline (Map of the same tuples, fresh process): ${f0(b.rssPerPod)} B RSS / ${f0(b.heapPerPod)} B heap per pod -> CA/baseline RSS ${f2((r.rssPerPod as number) / (b.rssPerPod as number))}`,
      ...PATTERNS.map(
        (p) =>
          `authorize per call, ${p}: ${costs(a150[p])} p50/p99 at ${PODS} pods vs ${costs(a1[p])} at 1000 pods = ${ratio(a150[p], a1[p])} (allowed ${f2(a150[p].allowed)} / ${f2(a1[p].allowed)}); the map index (by-name path): ${costs(m150[p])} vs ${costs(m1[p])}`,
      ),
      `authorize per call, ${wideLine}`,
      `load average (1 min) ${f1(l0)} before the authorize rounds, ${f1(l1)} after; timing itself (an hrtime pair around an empty call) ${costs(r.timerFloor as Cost)} p50/p99, inside every tight-loop figure`,
      `in the call path: ${r.inPathTokens} bound tokens requested and reviewed in ${f1((r.inPathTokenMs as number) / 1000)} s (the 1000-pod side: an informer synced from a devcluster of its own); ${PATH_ROUNDS} measured rounds after one warm-up, ${PATH_INFLIGHT} calls in flight, ${r.inPathReviews} TokenReviews sent in them; CA RSS after ${f0(r.rssAfterInPathMiB)} MiB`,
      ...PATH_PATTERNS.map(pathLine),
      `load average (1 min) ${f1(pl0)} before the in-path rounds, ${f1(pl1)} after`,
    ];
    for (const l of lines) console.log(l);
    if (refused.length > 0) {
      // A refused call took another path (the error path): its authorize time is not the one asked for.
      for (const [size, p, x] of refused) console.error(`IN-PATH CALLS REFUSED: ${x.failed} ${p} calls at ${size} (first: ${x.firstError ?? '?'})`);
      process.exitCode = 1;
    }
    for (const [size, side] of [[`${PODS} pods`, p150], ['1000 pods', p1]] as const) {
      for (const p of PATH_PATTERNS) {
        // Every issued call impersonates: each one went through authorize() once.
        const x = side[p];
        if (x.timed < x.issued || x.timed > x.issued + x.failed) {
          console.error(`IN-PATH: authorize() timed ${x.timed} times for ${x.issued} issued and ${x.failed} refused ${p} calls at ${size}`);
          process.exitCode = 1;
        }
      }
    }
    if (process.argv.includes('--write-docs')) {
      const body = [
        `Command: \`npm run bench:pod-index -- --write-docs\` (${PODS} realistic pods of ~3 KB JSON on ${NODES} nodes, plus one ztunnel per node; three processes: devcluster, CA, baseline). Same-run numbers on a shared 2-core machine.`,
        '',
        '| what | value |',
        '|---|---|',
        `| CA sync (pages of 500 one page ahead, kept-alive, streamed decode) | ${f1((r.syncMs as number) / 1000)} s |`,
        `| CA CPU during the sync (user + system) | ${f1((r.syncCpuMs as number) / 1000)} s |`,
        `| CA RSS per indexed pod (after GC) | ${f0(r.rssPerPod)} B (heap ${f0(r.heapPerPod)} B); CA RSS ${f0(r.rssMiB)} MiB |`,
        `| baseline: Map of the same tuples, fresh process | ${f0(b.rssPerPod)} B RSS (heap ${f0(b.heapPerPod)} B) per pod |`,
        ...PATTERNS.map((p) => `| authorize p50 / p99, ${WHAT[p]}: ${PODS} pods; 1,000 pods (same pods per node); ratio | ${costs(a150[p])}; ${costs(a1[p])}; **${ratio(a150[p], a1[p])}** |`),
        `| authorize p50 / p99, ${w150.identities} distinct identities, one call per account cycled (the parsed-identity cache once held 4,096, cleared when full): ${PODS} pods; 1,000 pods (${w1.identities} identities); ratio; parses per call | ${costs(w150)}; ${costs(w1)}; **${ratio(w150, w1)}**; ${f2(w150.parsesPerCall)} / ${f2(w1.parsesPerCall)} |`,
        `| the map index (InMemoryPodIndex, the authorizer's by-name path), burst / random: ${PODS} pods; 1,000 pods | ${costs(m150.burst)}, ${costs(m150.random)}; ${costs(m1.burst)}, ${costs(m1.random)} |`,
        `| load average (1 min) around the authorize rounds; what timing one call costs by itself (an hrtime pair around an empty call, inside every tight-loop figure above) | ${f1(l0)} -> ${f1(l1)}; ${costs(r.timerFloor as Cost)} |`,
        ...PATH_PATTERNS.map(
          (p) =>
            `| authorize p50 / p99 **in the call path**, ${p === 'burst' ? "a node agent's burst (authorize() timed inside CertificateService.createCertificate with the real TokenReview authenticator and its token cache, the self-signed signer on 2 signing workers, " + String(PATH_INFLIGHT) + ' calls in flight; no TLS/HTTP/2)' : 'random callers (the same path)'}: ${PODS} pods; 1,000 pods; ratio (the tight loop's ratio above) | ${costs(p150[p])}; ${costs(p1[p])}; **${ratio(p150[p], p1[p])}** (${ratio(a150[p], a1[p])}) |`,
        ),
        `| in the call path: calls issued / refused; CA CPU per issued call (all threads); authorize's mean share of it — ${PATH_PATTERNS.join(', ')} | ${PATH_PATTERNS.map((p) => `${p}: ${p150[p].issued} / ${p150[p].failed}, ${f0(p150[p].cpuUsPerCall)} µs, ${share(p150[p])} at ${PODS} pods; ${p1[p].issued} / ${p1[p].failed}, ${f0(p1[p].cpuUsPerCall)} µs, ${share(p1[p])} at 1,000`).join('; ')} |`,
        `| load average (1 min) around the in-path rounds | ${f1(pl0)} -> ${f1(pl1)} |`,
        `| devcluster: load ${c.storedPods} pods through admission | ${f1((c.loadMs as number) / 1000)} s |`,
        `| devcluster: memory per stored pod | ${f0(c.heapPerPod)} B heap, ${f0(c.rssPerPod)} B RSS (RSS ${f0(c.rssMiB)} MiB) |`,
        `| devcluster: first page of 500 / a page halfway (continue token) | ${f1(c.firstPageMs)} ms / ${f1(c.deepPageMs)} ms |`,
        `| devcluster: whole list in ${c.pages} pages of 500 | ${f1((c.walkMs as number) / 1000)} s |`,
        '',
        `Memory needed: the devcluster child runs with --max-old-space-size=${CLUSTER_HEAP_MB} (it used ${f0(c.rssAfterWalkMiB)} MiB RSS after the walk), the CA child with ${CA_HEAP_MB} (its RSS after the in-path rounds, signing workers and ${r.inPathTokens} cached tokens included: ${f0(r.rssAfterInPathMiB)} MiB).`,
      ].join('\n');
      writeDocSection({ root, marker: 'pod-index', heading: 'CA pod index at cluster scale (`npm run bench:pod-index`)', body });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
