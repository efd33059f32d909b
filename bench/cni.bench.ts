/**
 * `npm run bench:cni`: latency of one istio-cni ADD, measured as the runtime sees it (process start
 * to exit), on the ambient path (devcluster reads + registration with the real node broker) and
 * the sidecar path (devcluster read + rules; in dry-run, and applied in a real netns when root),
 * with baselines measured in the same run, interleaved round-robin: `node -e 0` and the packaged
 * binary answering VERSION. Results go to the CNI section of docs/benchmarks.md.
 *
 * BENCH_CNI_ITERATIONS (default 40) runs per scenario. BENCH_CNI_BEFORE=<path of another istio-cni
 * executable> adds its two ADD scenarios to the same run ("before" figures for a change).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { seaBinaries, seaBundleDefinition } from '../test/support/sea-binary.js';
import { adminRequest, namespaceObject, podObject, sidecarPod, startPluginCluster, e2eUnavailable, Netns, CNI_NAMESPACE } from '../test/cni/e2e/fixture.js';
import { NODE_NAME, startBrokerStack, type BrokerStack } from '../test/cni/e2e/broker-stack.js';
import { pct, writeDocSection } from './report.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const ROOT = resolve(here, '../..');
const ITERATIONS = Number(process.env.BENCH_CNI_ITERATIONS ?? 40);

interface Scenario {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Record<string, string>;
  readonly stdin: string;
  readonly samples: number[];
}

function once(s: Scenario): Promise<number> {
  return new Promise((res, rej) => {
    const started = process.hrtime.bigint();
    const child = spawn(s.command, [...s.args], { env: { PATH: process.env.PATH ?? '', ...s.env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', rej);
    child.on('close', (code) => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      if (code !== 0) rej(new Error(`${s.name} exited ${code}: ${out} ${err.slice(-500)}`));
      else res(ms);
    });
    // A child that never reads stdin (node -e 0, VERSION) may exit before the write: EPIPE is no failure of the run.
    child.stdin.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') rej(e);
    });
    if (s.stdin === '') child.stdin.end();
    else child.stdin.end(s.stdin);
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'cni-bench-'));
  const bins = await seaBinaries();
  // The bundle the single executable embeds, run by plain node: isolates what SEA packaging costs
  // or saves (and does not depend on dist/, which other builds rewrite).
  const bundle = join(dir, 'istio-cni.cjs');
  const { SEA_ENTRIES, seaBundleOptions } = await seaBundleDefinition();
  const plugin = SEA_ENTRIES.find((e) => e.name === 'istio-cni')!;
  await build({ ...seaBundleOptions(ROOT, plugin.entry), outfile: bundle, logLevel: 'silent' });
  const pc = await startPluginCluster(dir);
  let stack: BrokerStack | undefined;
  let netns: Netns | undefined;
  try {
    await pc.cluster.apply([
      namespaceObject('mesh', { 'istio.io/dataplane-mode': 'ambient' }),
      namespaceObject('shop'),
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'web', namespace: 'mesh' } },
      podObject('mesh', 'web-1', { nodeName: NODE_NAME, serviceAccountName: 'web' }),
      // On the broker's node: the sidecar ADD reads it from the broker (POST /v1/sidecar-pod); an older binary GETs it.
      sidecarPod('shop', 'cart-1', {}, NODE_NAME),
    ]);
    stack = await startBrokerStack(pc);
    // The runtime passes the pod's UID (K8S_POD_UID); the broker answers only for the UID it watches.
    const cart = (await adminRequest(pc.cluster, 'GET', '/api/v1/namespaces/shop/pods/cart-1')) as { metadata: { uid: string } };
    const cartArgs = `K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1;K8S_POD_UID=${cart.metadata.uid}`;

    const base = { cniVersion: '1.0.0', name: 'cbnet', type: 'istio-cni', cni_agent_run_dir: pc.runDir, pod_namespace: CNI_NAMESPACE, plugin_log_level: 'warn' };
    const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [{ address: '10.244.0.9/24', gateway: '10.244.0.1', interface: 0 }] };
    const cniEnv = (pod: string, netnsPath: string) => ({
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: 'bench01',
      CNI_NETNS: netnsPath,
      CNI_IFNAME: 'eth0',
      CNI_PATH: '/opt/cni/bin',
      CNI_ARGS: `IgnoreUnknown=1;${pod}`,
    });
    const scenario = (name: string, command: string, args: string[], env: Record<string, string>, stdin: string): Scenario => ({
      name, command, args, env, stdin, samples: [],
    });
    const scenarios: Scenario[] = [
      scenario('node -e 0', process.execPath, ['-e', '0'], {}, ''),
      scenario('istio-cni VERSION (single executable)', bins.istioCni, [], { CNI_COMMAND: 'VERSION' }, ''),
      scenario('istio-cni VERSION (node + the same bundle, no SEA)', process.execPath, [bundle], { CNI_COMMAND: 'VERSION' }, ''),
      scenario(
        'ADD ambient (one round trip to the broker; an older binary: GET pod + ns, POST /cmdadd)',
        bins.istioCni,
        [],
        cniEnv('K8S_POD_NAMESPACE=mesh;K8S_POD_NAME=web-1', '/var/run/netns/bench-ambient'),
        JSON.stringify({ ...base, ambient_enabled: true, prevResult }),
      ),
      scenario(
        'ADD sidecar, dry-run (pod from the broker, build rules, write file; an older binary: GET pod)',
        bins.istioCni,
        [],
        { ...cniEnv(cartArgs, '/var/run/netns/bench-dry'), DRY_RUN_FILE_PATH: join(dir, 'dry-run.txt') },
        JSON.stringify({ ...base, prevResult }),
      ),
    ];
    const before = process.env.BENCH_CNI_BEFORE;
    if (before) {
      for (const s of scenarios.slice(3, 5)) scenarios.push({ ...s, name: `${s.name} [before: ${before}]`, command: before, samples: [] });
    }
    // The fallback: without K8S_POD_UID the broker is not asked and the pod is read from the API server.
    const dry = scenarios[4]!;
    scenarios.push({ ...dry, name: 'ADD sidecar, dry-run, no K8S_POD_UID (API fallback: GET pod)', env: { ...dry.env, CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1' }, samples: [] });
    const noNetns = e2eUnavailable();
    if (!noNetns) {
      netns = new Netns(`cbcni-bench-${process.pid}`);
      scenarios.push(
        scenario(
          'ADD sidecar, applied in a netns (pod from the broker, reconcile + iptables-restore)',
          bins.istioCni,
          [],
          cniEnv(cartArgs, netns.path),
          JSON.stringify({ ...base, prevResult }),
        ),
      );
    }
    // Warm-up (page cache, devcluster JIT), then interleaved rounds.
    for (const s of scenarios) await once(s);
    for (let i = 0; i < ITERATIONS; i++) {
      for (const s of scenarios) s.samples.push(await once(s));
    }

    const stats = scenarios.map((s) => {
      const sorted = [...s.samples].sort((a, b) => a - b);
      return { name: s.name, p50: pct(sorted, 50), p99: pct(sorted, 99), n: sorted.length };
    });
    const nodeP50 = stats[0]!.p50;
    const seaP50 = stats[1]!.p50;
    const lines = [
      `| scenario | p50 ms | p99 ms | p50 / \`node -e 0\` | p50 / SEA VERSION |`,
      `|---|---:|---:|---:|---:|`,
      ...stats.map((s) => `| ${s.name} | ${s.p50.toFixed(1)} | ${s.p99.toFixed(1)} | ${(s.p50 / nodeP50).toFixed(2)} | ${(s.p50 / seaP50).toFixed(2)} |`),
    ];
    const when = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const note = [
      `Run ${when}, ${ITERATIONS} runs per scenario interleaved round-robin after one warm-up each, ${cpus().length} cores, Node ${process.version}.`,
      'Latency is process start to exit as the runtime sees it (spawn → close), stdin config included.',
      noNetns ? `The applied-in-a-netns scenario was skipped: ${noNetns}.` : 'The applied scenario re-ADDs one netns, so each run also removes the previous rules (the applier reconciles).',
    ];
    process.stdout.write(`${lines.join('\n')}\n\n${note.join('\n')}\n`);
    writeDocSection({ root: ROOT, marker: 'cni', heading: 'CNI plugin (`npm run bench:cni`)', body: [...lines, '', ...note].join('\n') });
  } finally {
    netns?.remove();
    await stack?.stop();
    await pc.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:cni failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
