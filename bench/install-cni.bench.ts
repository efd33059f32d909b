/**
 * `npm run bench:install`: install-cni as a node sees it, each number next to a baseline
 * measured in the same run. Results go to the install-cni section of docs/benchmarks.md.
 *
 * 1. Install pass, clean host dirs -> ready (the packaged binaries copied, the plugin kubeconfig
 *    written, the conflist chained): in process (`InstallDaemon` on the real clock) and as the
 *    real `certbroker install-cni` CLI (spawn -> its "install-cni ready"; /readyz is checked to
 *    answer 200), with and without the API server parts. Baseline: `fs.copyFile` of the same
 *    binaries and plain writes of the same kubeconfig and conflist. Scenarios take turns within
 *    each round, in an order that rotates from round to round.
 * 2. Re-chain: another CNI replaces the conflist (temp file + rename) without our entry; time
 *    until the file on disk holds it again, seen through fs.watch. Baseline: a bare fs.watch in
 *    the same directory seeing the same write pattern. Samples alternate.
 * 3. Idle: CPU time and wake-ups of the running daemon with nothing changing, over the same
 *    windows as an idle `node -e "setInterval(()=>{},1000)"`.
 *
 * The CLI runs "as deployed" against a devcluster (istio-cni service account, shipped RBAC and
 * DaemonSet): UNINSTALL_ON_EXIT=unless-upgrade and the repair controller on.
 *
 * BENCH_INSTALL_ROUNDS (default 5), BENCH_INSTALL_RECHAIN_SAMPLES (default 100),
 * BENCH_INSTALL_IDLE_ROUNDS (default 3) of BENCH_INSTALL_IDLE_SECONDS (default 30) each.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, watch, writeFileSync } from 'node:fs';
import { copyFile, open, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { Registry } from 'prom-client';
import { systemClock } from '../src/core/clock.js';
import { createLogger } from '../src/core/log.js';
import { InstallDaemon, Installer, chainState, fixedShutdownAdvisor, loadInstallConfig, type JsonObject } from '../src/cni/install/index.js';
import { seaBinaries } from '../test/support/sea-binary.js';
import { createNode, serviceAccountToken, startCluster, type DevCluster } from '../test/support/cluster.js';
import { findObject, identityObjects } from '../test/deploy/manifests.js';
import { CONFORMANCE, DaemonProcess, makeHostTree, treeEnv, type HostTree } from '../test/cni/install/host-tree.js';
import { median, pct, writeDocSection } from './report.js';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const ROUNDS = Number(process.env.BENCH_INSTALL_ROUNDS ?? 5);
const RECHAIN_SAMPLES = Number(process.env.BENCH_INSTALL_RECHAIN_SAMPLES ?? 100);
const IDLE_ROUNDS = Number(process.env.BENCH_INSTALL_IDLE_ROUNDS ?? 3);
const IDLE_SECONDS = Number(process.env.BENCH_INSTALL_IDLE_SECONDS ?? 30);
/** Pause after each re-chain sample, so the daemon's pass over its own write is over. */
const SETTLE_MS = 300;
/** InstallDaemon's default quiet time after a watch event (the CLI does not change it). */
const DAEMON_DEBOUNCE_MS = 50;
const NS = 'istio-system';
const NODE = 'node-a';
const PRIMARY = '10-calico.conflist';
const BINARIES = ['istio-cni', 'istio-iptables'] as const;
const KUBECONFIG_NAME = 'istio-cni-kubeconfig';
const READY = 'install-cni ready';
const REINSERTED = 'CNI config lost our entry; re-inserted';
const FIGHT = 'fighting another writer: it keeps undoing our change';
const ORIGINAL = readFileSync(CONFORMANCE + 'list.conflist', 'utf8');
const now = (): bigint => process.hrtime.bigint();
const msSince = (t0: bigint, t1: bigint = now()): number => Number(t1 - t0) / 1e6;
const fmt = (x: number, digits = 1): string => x.toFixed(digits);

// ---- hosts and environments -----------------------------------------------------------------

interface Env {
  readonly binDir: string;
  /** KUBECONFIG of the istio-cni service account in the devcluster. */
  readonly kubeconfig: string;
}

/** A clean host tree: empty bin and run dirs, the primary CNI's conflist without our entry. */
function cleanHost(): HostTree {
  const tree = makeHostTree();
  writeFileSync(join(tree.netDir, PRIMARY), ORIGINAL, { mode: 0o644 });
  return tree;
}

/** install-cni with no API server parts: nothing to ask at SIGTERM, no repair controller. */
function localEnv(tree: HostTree, env: Env): Record<string, string> {
  return treeEnv(tree, {
    CNI_BINARIES_SOURCE_DIR: env.binDir,
    RESYNC_INTERVAL_SECONDS: '15',
    LOG_LEVEL: 'info',
    UNINSTALL_ON_EXIT: 'never',
    REPAIR_ENABLED: 'false',
  });
}

/** install-cni as the DaemonSet runs it: upgrade check at SIGTERM, repair controller on. */
function deployedEnv(tree: HostTree, env: Env): Record<string, string> {
  return { ...localEnv(tree, env), KUBECONFIG: env.kubeconfig, UNINSTALL_ON_EXIT: 'unless-upgrade', DAEMONSET_NAME: 'istio-cni-node', REPAIR_ENABLED: 'true' };
}

async function startApiServer(dir: string): Promise<{ cluster: DevCluster; kubeconfig: string }> {
  const cluster = await startCluster({ simulateKubelet: false });
  await cluster.apply(await identityObjects());
  await cluster.apply([await findObject('DaemonSet', 'istio-cni-node')]);
  await createNode(cluster, { name: NODE, labels: { 'kubernetes.io/os': 'linux' } });
  const token = await serviceAccountToken(cluster, { namespace: NS, serviceAccountName: 'istio-cni' });
  const kubeconfig = join(dir, 'install-cni-kubeconfig');
  writeFileSync(kubeconfig, cluster.kubeconfigYaml({ token }), { mode: 0o600 });
  return { cluster, kubeconfig };
}

/** Resolves (at the moment the line arrives) once the daemon has logged `msg`; rejects if it exits first. */
function untilLog(d: DaemonProcess, msg: string, timeoutMs = 60_000): Promise<bigint> {
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => finish(new Error(`no "${msg}" within ${timeoutMs} ms\n${d.describe()}`)), timeoutMs);
    const check = () => {
      if (d.hasLog(msg)) finish(undefined, now());
    };
    const onExit = () => finish(new Error(`install-cni exited before "${msg}"\n${d.describe()}`));
    const finish = (err?: Error, at?: bigint) => {
      clearTimeout(timer);
      d.child.stderr!.off('data', check);
      d.child.off('exit', onExit);
      if (err) reject(err);
      else resolvePromise(at!);
    };
    // DaemonProcess's own listener was added first, so its logs include this chunk's lines.
    d.child.stderr!.on('data', check);
    d.child.on('exit', onExit);
    check();
  });
}

// ---- 1. install pass --------------------------------------------------------------------------

/** What a finished install leaves on the host, taken from the first real install. */
interface Expected {
  /** The plugin entry the daemons chain (they all run with the same plugin settings). */
  readonly entry: JsonObject;
  readonly kubeconfig: string;
  readonly conflist: string;
}

interface InstallScenario {
  readonly name: string;
  readonly run: (tree: HostTree) => Promise<number>;
  readonly samples: number[];
}

function checkInstalled(tree: HostTree, options: { env: Env; expected: Expected; who: string }): void {
  const { env, expected, who } = options;
  for (const name of BINARIES) {
    const src = statSync(join(env.binDir, name));
    const dst = statSync(join(tree.binDir, name));
    if (dst.size !== src.size || (dst.mode & 0o111) === 0) throw new Error(`${who}: ${name} not installed whole and executable`);
  }
  const conflist = readFileSync(join(tree.netDir, PRIMARY), 'utf8');
  if (!chainedOnDisk(join(tree.netDir, PRIMARY), expected.entry)) throw new Error(`${who}: conflist not chained`);
  const kubeconfig = readFileSync(join(tree.runDir, KUBECONFIG_NAME), 'utf8');
  if (kubeconfig !== expected.kubeconfig || conflist !== expected.conflist) throw new Error(`${who}: files differ from the first install's`);
}

async function fsyncPath(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** The baseline: the same bytes put in the same places with plain calls (optionally fsynced, file then dir). */
async function plainInstall(tree: HostTree, options: { env: Env; expected: Expected; sync: boolean }): Promise<number> {
  const t0 = now();
  const writes: string[] = [];
  for (const name of BINARIES) {
    const dst = join(tree.binDir, name);
    await copyFile(join(options.env.binDir, name), dst);
    writes.push(dst);
  }
  const kubeconfig = join(tree.runDir, KUBECONFIG_NAME);
  await writeFile(kubeconfig, options.expected.kubeconfig, { mode: 0o600 });
  const conflist = join(tree.netDir, PRIMARY);
  await writeFile(conflist, options.expected.conflist);
  if (options.sync) {
    for (const path of [...writes, kubeconfig, conflist]) {
      await fsyncPath(path);
      await fsyncPath(dirname(path));
    }
  }
  return msSince(t0);
}

/** One InstallDaemon in this process on the real clock, from run() to its "install-cni ready". */
async function inProcessInstall(tree: HostTree, env: Env): Promise<number> {
  const config = loadInstallConfig(localEnv(tree, env));
  let settle!: (err?: Error) => void;
  const ready = new Promise<void>((res, rej) => (settle = (err) => (err ? rej(err) : res())));
  const logger = createLogger({
    level: 'info',
    sink: (line) => {
      const rec = JSON.parse(line) as { msg?: string; err?: string };
      if (rec.msg === READY) settle();
      else if (rec.msg === 'install pass failed; will retry') settle(new Error(`in-process install failed: ${rec.err}`));
    },
  });
  const abort = new AbortController();
  const t0 = now();
  const daemon = new InstallDaemon({ config, logger, clock: systemClock, registry: new Registry(), shutdownAdvisor: fixedShutdownAdvisor({ action: 'keep', reason: 'bench' }) });
  const running = daemon.run(abort.signal);
  try {
    await ready;
    return msSince(t0);
  } finally {
    abort.abort();
    await running;
  }
}

/** The real CLI: spawn -> "install-cni ready" on stderr; /readyz must then answer 200 (untimed). */
async function cliInstall(childEnv: Record<string, string>): Promise<number> {
  const t0 = now();
  const d = new DaemonProcess(childEnv);
  try {
    const t1 = await untilLog(d, READY);
    const probe = await d.get('/readyz');
    if (probe.status !== 200) throw new Error(`/readyz ${probe.status} after "${READY}": ${probe.body}`);
    return msSince(t0, t1);
  } finally {
    const exit = await d.stop('SIGTERM');
    if (exit.code !== 0) throw new Error(`install-cni exited ${exit.code ?? exit.signal}\n${d.describe()}`);
  }
}

async function benchInstall(env: Env): Promise<{ lines: string[]; expected: Expected }> {
  // Warm-up: one in-process install (page cache, JIT) whose result every later run must match.
  const first = cleanHost();
  let expected: Expected;
  try {
    await inProcessInstall(first, env);
    expected = {
      entry: new Installer(loadInstallConfig(localEnv(first, env))).pluginEntry,
      kubeconfig: readFileSync(join(first.runDir, KUBECONFIG_NAME), 'utf8'),
      conflist: readFileSync(join(first.netDir, PRIMARY), 'utf8'),
    };
    checkInstalled(first, { env, expected, who: 'warm-up' });
  } finally {
    first.cleanup();
  }
  const scenarios: InstallScenario[] = [
    { name: '`fs.copyFile` of the binaries + plain writes of the kubeconfig and conflist (baseline)', run: (t) => plainInstall(t, { env, expected, sync: false }), samples: [] },
    { name: 'the same plain copy and writes, each file and its dir fsynced', run: (t) => plainInstall(t, { env, expected, sync: true }), samples: [] },
    { name: 'InstallDaemon in process: run() -> ready', run: (t) => inProcessInstall(t, env), samples: [] },
    { name: 'CLI `certbroker install-cni`, no API server parts: spawn -> ready', run: (t) => cliInstall(localEnv(t, env)), samples: [] },
    { name: 'CLI `certbroker install-cni` as deployed (upgrade check + repair, devcluster): spawn -> ready', run: (t) => cliInstall(deployedEnv(t, env)), samples: [] },
  ];
  for (const s of scenarios.slice(3)) {
    const tree = cleanHost();
    try {
      await s.run(tree); // warm-up of the CLI paths, unreported
    } finally {
      tree.cleanup();
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < scenarios.length; k++) {
      const s = scenarios[(round + k) % scenarios.length]!;
      const tree = cleanHost();
      try {
        spawnSync('sync'); // no dirty pages of the previous scenario left to flush during this one
        s.samples.push(await s.run(tree));
        checkInstalled(tree, { env, expected, who: s.name });
      } finally {
        tree.cleanup();
      }
    }
  }
  const base = median(scenarios[0]!.samples);
  const lines = [
    '| install pass, clean host -> ready | median ms | min–max ms | median / baseline |',
    '|---|---:|---:|---:|',
    ...scenarios.map((s) => {
      const m = median(s.samples);
      return `| ${s.name} | ${fmt(m)} | ${fmt(Math.min(...s.samples))}–${fmt(Math.max(...s.samples))} | ${fmt(m / base, 2)} |`;
    }),
  ];
  return { lines, expected };
}

// ---- 2. re-chain ------------------------------------------------------------------------------

/**
 * Watches `dir`, runs `act` (which returns the moment its write landed) and resolves with the ms
 * from then until a watch event for which `done` holds.
 */
function watchLatency(dir: string, act: () => bigint, done: (file: string | null) => boolean, timeoutMs = 30_000): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    let t0: bigint | undefined;
    const w = watch(dir, (_event, file) => {
      if (t0 === undefined || !done(file)) return;
      const t1 = now();
      finish();
      resolvePromise(msSince(t0, t1));
    });
    const timer = setTimeout(() => {
      finish();
      reject(new Error(`nothing seen in ${dir} within ${timeoutMs} ms`));
    }, timeoutMs);
    const finish = () => {
      clearTimeout(timer);
      w.close();
    };
    t0 = act();
  });
}

/** How another CNI writes its config: a temp file in the same dir, renamed over the target. */
function replaceFile(dir: string, name: string, text: string): bigint {
  const tmp = join(dir, `.${name}.new`);
  writeFileSync(tmp, text, { mode: 0o644 });
  const t0 = now();
  renameSync(tmp, join(dir, name));
  return t0;
}

function chainedOnDisk(path: string, entry: JsonObject): boolean {
  try {
    return chainState(JSON.parse(readFileSync(path, 'utf8')), entry, PRIMARY) === 'installed';
  } catch {
    return false; // between writes, or not JSON
  }
}

async function benchRechain(tree: HostTree, options: { daemon: DaemonProcess; entry: JsonObject }): Promise<string[]> {
  const d = options.daemon;
  const probe = 'bench-probe.txt'; // not a CNI config name: the daemon wakes on it but leaves it alone
  const bare = (): Promise<number> => watchLatency(tree.netDir, () => replaceFile(tree.netDir, probe, ORIGINAL), (file) => file === probe);
  const rechain = (): Promise<number> =>
    watchLatency(tree.netDir, () => replaceFile(tree.netDir, PRIMARY, ORIGINAL), () => chainedOnDisk(join(tree.netDir, PRIMARY), options.entry));
  const before = d.countLogs(REINSERTED);
  const fightsBefore = d.countLogs(FIGHT);
  const samples = { bare: [] as number[], rechain: [] as number[] };
  await bare();
  await rechain(); // warm-up pair
  await delay(SETTLE_MS);
  for (let i = 0; i < RECHAIN_SAMPLES; i++) {
    const order = i % 2 === 0 ? (['bare', 'rechain'] as const) : (['rechain', 'bare'] as const);
    for (const which of order) {
      samples[which].push(await (which === 'bare' ? bare() : rechain()));
      await delay(SETTLE_MS);
    }
  }
  const reinserted = d.countLogs(REINSERTED) - before;
  const b = [...samples.bare].sort((x, y) => x - y);
  const r = [...samples.rechain].sort((x, y) => x - y);
  const row = (name: string, s: number[]) =>
    `| ${name} | ${fmt(pct(s, 50), 2)} | ${fmt(pct(s, 90), 2)} | ${fmt(pct(s, 99), 2)} | ${fmt(pct(s, 50) / pct(b, 50), 1)} | ${fmt(pct(s, 99) / pct(b, 99), 1)} |`;
  return [
    `| another CNI replaces the conflist (temp + rename), ${RECHAIN_SAMPLES} samples each, alternating | p50 ms | p90 ms | p99 ms | p50 / bare | p99 / bare |`,
    '|---|---:|---:|---:|---:|---:|',
    row('bare `fs.watch` sees the same write in the same dir (baseline)', b),
    row(`install-cni has our entry back on disk (seen by \`fs.watch\`; includes the ${DAEMON_DEBOUNCE_MS} ms debounce)`, r),
    '',
    `Less the daemon's ${DAEMON_DEBOUNCE_MS} ms debounce, the re-chain's p50 is ${fmt(pct(r, 50) - DAEMON_DEBOUNCE_MS, 2)} ms = ${fmt((pct(r, 50) - DAEMON_DEBOUNCE_MS) / pct(b, 50), 1)} × the bare watch's.`,
    `The daemon logged "${REINSERTED}" ${reinserted} times for ${RECHAIN_SAMPLES + 1} rewrites (warm-up included), and its fight warning ${d.countLogs(FIGHT) - fightsBefore} times.`,
  ];
}

// ---- 3. idle ----------------------------------------------------------------------------------

interface CpuSample {
  /** Per thread: CPU ms (se.sum_exec_runtime) and context switches. */
  readonly threads: Map<string, { cpuMs: number; switches: number }>;
}

/** Reads every thread's /proc/<pid>/task/<tid>/sched: ns-precise CPU time and switch counts. */
function cpuOf(pid: number): CpuSample {
  const threads = new Map<string, { cpuMs: number; switches: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/task/${tid}/sched`, 'utf8');
    } catch {
      continue; // the thread ended between the listing and the read
    }
    const field = (name: string): number => {
      const m = new RegExp(`^${name.replace(/\./g, '\\.')}\\s*:\\s*([0-9.]+)`, 'm').exec(text);
      if (!m) throw new Error(`/proc/${pid}/task/${tid}/sched has no ${name}`);
      return Number(m[1]);
    };
    threads.set(tid, { cpuMs: field('se.sum_exec_runtime'), switches: field('nr_switches') });
  }
  return { threads };
}

/** CPU ms and context switches between two samples (threads that started in between count whole). */
function cpuDelta(a: CpuSample, b: CpuSample): { cpuMs: number; switches: number } {
  let cpuMs = 0;
  let switches = 0;
  for (const [tid, end] of b.threads) {
    const start = a.threads.get(tid) ?? { cpuMs: 0, switches: 0 };
    cpuMs += end.cpuMs - start.cpuMs;
    switches += end.switches - start.switches;
  }
  return { cpuMs, switches };
}

async function benchIdle(daemon: ChildProcess): Promise<string[]> {
  const bare = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  // What prom-client's default metrics arm in every component: an event-loop-delay histogram
  // sampling every 10 ms (collectDefaultMetrics' eventLoopMonitoringPrecision).
  const lagMonitor = spawn(
    process.execPath,
    ['-e', "require('node:perf_hooks').monitorEventLoopDelay({ resolution: 10 }).enable(); setInterval(() => {}, 1000)"],
    { stdio: 'ignore' },
  );
  const procs = [
    { name: '`node -e "setInterval(()=>{},1000)"` (baseline)', pid: bare.pid!, rounds: [] as Array<{ cpuMs: number; switches: number }> },
    { name: 'the same + `monitorEventLoopDelay({ resolution: 10 })` (what prom-client default metrics run)', pid: lagMonitor.pid!, rounds: [] as Array<{ cpuMs: number; switches: number }> },
    { name: 'install-cni daemon as deployed (installed, nothing changing)', pid: daemon.pid!, rounds: [] as Array<{ cpuMs: number; switches: number }> },
  ];
  try {
    await delay(2000); // past the baselines' start-up
    for (let r = 0; r < IDLE_ROUNDS; r++) {
      const start = procs.map((p) => cpuOf(p.pid));
      await delay(IDLE_SECONDS * 1000);
      const end = procs.map((p) => cpuOf(p.pid));
      procs.forEach((p, i) => p.rounds.push(cpuDelta(start[i]!, end[i]!)));
    }
  } finally {
    bare.kill();
    lagMonitor.kill();
  }
  const perMinute = (x: number) => (x * 60) / IDLE_SECONDS;
  const baseCpu = median(procs[0]!.rounds.map((x) => x.cpuMs));
  return [
    `| idle process, ${IDLE_ROUNDS} windows of ${IDLE_SECONDS} s, measured side by side | CPU ms per minute (median) | each window, ms/min | % of one core | wake-ups/s (context switches, all threads) | CPU / baseline |`,
    '|---|---:|---:|---:|---:|---:|',
    ...procs.map((p) => {
      const cpu = median(p.rounds.map((x) => x.cpuMs));
      const sw = median(p.rounds.map((x) => x.switches));
      return `| ${p.name} | ${fmt(perMinute(cpu))} | ${p.rounds.map((x) => fmt(perMinute(x.cpuMs))).join(' / ')} | ${fmt((cpu / (IDLE_SECONDS * 1000)) * 100, 3)} | ${fmt(sw / IDLE_SECONDS)} | ${fmt(cpu / baseCpu, 1)} |`;
    }),
  ];
}

// ---- main -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const load0 = loadavg()[0]!;
  const dir = mkdtempSync(join(tmpdir(), 'install-bench-'));
  const bins = await seaBinaries();
  const api = await startApiServer(dir);
  const env: Env = { binDir: bins.dir, kubeconfig: api.kubeconfig };
  const sizes = BINARIES.map((b) => statSync(join(bins.dir, b)).size);
  let tree: HostTree | undefined;
  let daemon: DaemonProcess | undefined;
  try {
    const install = await benchInstall(env);
    process.stdout.write(`${install.lines.join('\n')}\n\n`);

    tree = cleanHost();
    daemon = new DaemonProcess(deployedEnv(tree, env));
    await untilLog(daemon, READY);
    await delay(1000);
    const rechain = await benchRechain(tree, { daemon, entry: install.expected.entry });
    process.stdout.write(`${rechain.join('\n')}\n\n`);
    await delay(2000);
    const idle = await benchIdle(daemon.child);
    process.stdout.write(`${idle.join('\n')}\n\n`);

    const when = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const note = [
      `Run ${when}, ${cpus().length} cores, Node ${process.version}; load average (1 min) ${fmt(load0, 2)} at the start, ${fmt(loadavg()[0]!, 2)} at the end.`,
      `Binaries: the packaged single executables, ${sizes.map((s) => `${fmt(s / 2 ** 20)} MiB`).join(' + ')}; host dirs under ${tmpdir()} (same disk as the sources); \`sync\` before each install run.`,
      `Install: ${ROUNDS} rounds after one unreported warm-up per path, every scenario once per round, order rotated each round.`,
    ];
    const body = [...install.lines, '', ...rechain, '', ...idle, '', ...note].join('\n');
    process.stdout.write(`${note.join('\n')}\n`);
    writeDocSection({ root: ROOT, marker: 'install-cni', heading: 'install-cni (`npm run bench:install`)', body });
  } finally {
    if (daemon) await daemon.stop('SIGTERM');
    tree?.cleanup();
    await api.cluster.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:install failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
