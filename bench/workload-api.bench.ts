/**
 * `npm run bench:workload-api` — the SPIFFE Workload API front (root: the client runs in a real
 * kubelet-style pod cgroup).
 *
 * 1. First FetchX509SVID message for a cached identity, p50/p99, against a bare grpc-js unary call
 *    returning the same bytes (the encoded X509SVIDResponse) over the same kind of socket (plain
 *    gRPC over a Unix socket), both from one client process in the pod's cgroup, samples
 *    interleaved. Two shapes: a new connection per sample (what a workload does when it starts:
 *    dial, attestation, first message) and a kept connection (a new stream: the re-check only).
 *    The new-connection shape is measured against two brokers in the same run: SO_PEERCRED
 *    through the long-lived helper (the default) and through a Perl start per batch (the fallback).
 * 2. Attestation per connection, alone: SO_PEERCRED through the helper + /proc (what the broker
 *    does) and through a Perl start per batch, one connection at a time and 16 at once, with the
 *    machine's processes and with 500 more; next to the alternatives it was chosen over, on the
 *    same connections: pidfd_getfd from a long-lived Perl (needs ptrace rights over the broker),
 *    `ss -xpn` (iproute2 finds the peer PID by reading every process's fds) and `ss -xn src`
 *    (peer inode) + a /proc/<pid>/fd scan in Node. Both `ss` ways only work when the client shares
 *    the broker's network namespace, which a pod does not (docs/security.md).
 *
 * BENCH_WORKLOAD_SAMPLES (default 300) samples per side; BENCH_WORKLOAD_ATTEST (default 60) connections per attestation row.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client, credentials, Metadata, Server, ServerCredentials, type sendUnaryData, type ServerUnaryCall, type ServiceError } from '@grpc/grpc-js';
import { median, pct, writeDocSection } from './report.js';

const SAMPLES = Number(process.env.BENCH_WORKLOAD_SAMPLES ?? 300);
const ATTEST = Number(process.env.BENCH_WORKLOAD_ATTEST ?? 60);
const EXTRA_PROCESSES = 500;
const run = promisify(execFile);
const here = fileURLToPath(new URL('.', import.meta.url));
const ROOT = join(here, '..', '..');
const ms = (t0: number) => performance.now() - t0;

// ---------------------------------------------------------------------------------------------
// The client process (in the pod cgroup): `--client <workload socket> <bare socket> <samples>`,
// or `--connect <socket> <n> <parallel>` (raw connections for the attestation rows).

async function clientMain(argv: string[]): Promise<void> {
  const { typedMethod } = await import('../src/grpc/typed-methods.js');
  const { workloadApiServiceDefinition } = await import('../src/broker/index.js');
  const { WORKLOAD_API_METHOD, WORKLOAD_HEADER, WORKLOAD_HEADER_VALUE } = await import('../src/protocol/workload-api.js');
  const [wl, wlBatch, bare, n] = [argv[0]!, argv[1]!, argv[2]!, Number(argv[3])];
  const fetch = typedMethod<Record<never, never>, unknown>(workloadApiServiceDefinition(), WORKLOAD_API_METHOD.fetchX509Svid);
  const md = () => {
    const m = new Metadata();
    m.set(WORKLOAD_HEADER, WORKLOAD_HEADER_VALUE);
    return m;
  };
  const first = (c: Client) =>
    new Promise<void>((resolve, reject) => {
      const s = c.makeServerStreamRequest(fetch.path, fetch.requestSerialize, fetch.responseDeserialize, {}, md());
      s.once('data', () => {
        s.cancel();
        resolve();
      });
      s.once('error', (e: ServiceError) => (e.code === 1 ? undefined : reject(e)));
    });
  const id = (b: Buffer) => b;
  const unary = (c: Client) =>
    new Promise<void>((resolve, reject) => c.makeUnaryRequest('/bench.Bare/Echo', id, id, Buffer.alloc(0), md(), (e) => (e ? reject(e) : resolve())));
  const fresh = async (target: string, call: (c: Client) => Promise<void>) => {
    // Its own subchannel pool: a new connection (grpc-js would otherwise reuse the shared one).
    const c = new Client(`unix://${target}`, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
    try {
      await call(c);
    } finally {
      c.close();
    }
  };
  const out: Record<string, number[]> = { freshWl: [], freshWlBatch: [], freshBare: [], warmWl: [], warmBare: [] };
  const warmWl = new Client(`unix://${wl}`, credentials.createInsecure());
  const warmBare = new Client(`unix://${bare}`, credentials.createInsecure());
  for (let i = 0; i < 30; i++) {
    await fresh(wl, first);
    await fresh(wlBatch, first);
    await fresh(bare, unary);
    await first(warmWl);
    await unary(warmBare);
  }
  for (let i = 0; i < n; i++) {
    let t = performance.now();
    await fresh(wl, first);
    out.freshWl!.push(ms(t));
    t = performance.now();
    await fresh(wlBatch, first);
    out.freshWlBatch!.push(ms(t));
    t = performance.now();
    await fresh(bare, unary);
    out.freshBare!.push(ms(t));
    t = performance.now();
    await first(warmWl);
    out.warmWl!.push(ms(t));
    t = performance.now();
    await unary(warmBare);
    out.warmBare!.push(ms(t));
  }
  warmWl.close();
  warmBare.close();
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

/** Opens `n` connections, `parallel` at a time, each kept until the server closes it. */
async function connectMain(argv: string[]): Promise<void> {
  const [path, n, parallel] = [argv[0]!, Number(argv[1]), Number(argv[2])];
  for (let done = 0; done < n; done += parallel) {
    await Promise.all(
      Array.from({ length: Math.min(parallel, n - done) }, () => new Promise<void>((resolve) => connect(path).on('close', () => resolve()).on('error', () => resolve()))),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// The broker side.

interface Row {
  readonly what: string;
  readonly p50: number;
  readonly p99: number;
}

/** `ss -xpn` (one run per connection): the peer PID of our accepted socket, from iproute2. */
async function ssWithProcesses(inode: number): Promise<number | undefined> {
  const { stdout } = await run('ss', ['-xpnH']);
  const rows = stdout.split('\n').map((l) => l.trim().split(/\s+/));
  const peer = rows.find((f) => f[5] === String(inode))?.[7];
  const line = stdout.split('\n').find((l) => l.trim().split(/\s+/)[5] === peer);
  const m = line ? /pid=(\d+)/.exec(line) : null;
  return m ? Number(m[1]) : undefined;
}

/** `ss -xn src <path>` for the peer inode, then every /proc/<pid>/fd scanned for `socket:[peer]`. */
async function ssPeerAndScan(inode: number, path: string): Promise<number | undefined> {
  const { stdout } = await run('ss', ['-xnH', 'src', path]);
  const peer = stdout.split('\n').map((l) => l.trim().split(/\s+/)).find((f) => f[5] === String(inode))?.[7];
  if (!peer) return undefined;
  const target = `socket:[${peer}]`;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`) === target) return Number(pid);
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/**
 * The alternative (b) the helper was chosen over: a long-lived Perl that duplicates the broker's
 * descriptor itself (pidfd_open + pidfd_getfd, Linux >= 5.6; syscall numbers 434/438 on every
 * architecture) and reads SO_PEERCRED on the copy. It needs ptrace-attach rights over the broker
 * (CAP_SYS_PTRACE, or the same user with Yama ptrace_scope 0) and the descriptor number could name
 * another socket by the time it is copied; the helper needs neither.
 */
function pidfdGetfd(): { read(fd: number): Promise<number | undefined>; stop(): void } {
  const program = [
    'my $pidfd = syscall(434, getppid() + 0, 0); $| = 1;',
    'while (my $l = <STDIN>) {',
    '  my $fd = $pidfd < 0 ? -1 : syscall(438, $pidfd + 0, $l + 0, 0);',
    '  if ($fd < 0) { print "- $!\\n"; next; }',
    "  open(my $h, '+<&=', $fd); my $c = getsockopt($h, 1, 17); close($h);",
    '  print defined $c ? unpack("i", $c) : "- $!", "\\n";',
    '}',
  ].join('\n');
  const child = spawn('perl', ['-e', program], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting: Array<(line: string) => void> = [];
  createInterface({ input: child.stdout! }).on('line', (l) => waiting.shift()?.(l));
  return {
    read: (fd) =>
      new Promise((resolve) => {
        waiting.push((l) => resolve(/^\d+$/.test(l) ? Number(l) : undefined));
        child.stdin!.write(`${fd}\n`);
      }),
    stop: () => child.kill('SIGKILL'),
  };
}

function inodeOf(fd: number): number {
  return Number(/socket:\[(\d+)\]/.exec(readlinkSync(`/proc/self/fd/${fd}`))![1]);
}

function rowOf(what: string, samples: number[]): Row {
  const s = [...samples].sort((a, b) => a - b);
  return { what, p50: median(s), p99: pct(s, 99) };
}

async function attestationRows(dir: string, place: (pid: number) => void): Promise<Row[]> {
  const { ConnectionAttestor, PeerCredentialsHelper, PerlPeerCredentials, ProcessAttestor, procfsReader, cgroupAnchors, ownCgroup, socketFd } = await import('../src/broker/attestation/index.js');
  const path = join(dir, 'attest.sock');
  rmSync(path, { force: true });
  const processes = new ProcessAttestor(procfsReader(), cgroupAnchors(ownCgroup()));
  const rows: Row[] = [];
  const measure = async (what: string, parallel: number, attest: (s: Socket) => Promise<number | undefined>) => {
    const samples: number[] = [];
    let refused = 0;
    const server = createServer((socket) => {
      const t = performance.now();
      void attest(socket).then((pid) => {
        // A way this machine refuses (pidfd_getfd without ptrace rights) is reported, not timed.
        if (pid === undefined) refused++;
        else samples.push(ms(t));
        socket.destroy();
      });
    });
    await new Promise<void>((r) => server.listen(path, r));
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--connect', path, String(ATTEST), String(parallel)], { stdio: ['pipe', 'ignore', 'inherit'] });
    place(child.pid!);
    await new Promise((r) => child.on('exit', r));
    await new Promise<void>((r) => server.close(() => r()));
    rows.push(refused > 0 ? { what: `${what}: refused here for ${refused} of ${ATTEST} connections`, p50: NaN, p99: NaN } : rowOf(what, samples));
  };
  const helper = new PeerCredentialsHelper();
  helper.launch();
  const withHelper = new ConnectionAttestor({ peers: helper, processes });
  const perl = new PerlPeerCredentials();
  const withPerl = new ConnectionAttestor({ peers: perl, processes });
  const pidOf = (a: InstanceType<typeof ConnectionAttestor>) => async (s: Socket) => {
    const r = await a.attest(s);
    return r.ok ? r.peer.pid : undefined;
  };
  await measure('SO_PEERCRED (long-lived perl helper, SCM_RIGHTS) + /proc: what the broker does', 1, pidOf(withHelper));
  await measure('SO_PEERCRED (helper) + /proc, 16 connections at once (latency of each)', 16, pidOf(withHelper));
  await measure('  of which SO_PEERCRED through the helper', 1, async (s) => (await helper.read(s)).pid);
  helper.stop();
  await measure('SO_PEERCRED (a perl start per batch) + /proc: the fallback (the broker before)', 1, pidOf(withPerl));
  const runsBefore = perl.runs;
  await measure(`SO_PEERCRED (perl per batch) + /proc, 16 connections at once (latency of each)`, 16, pidOf(withPerl));
  const last = rows.at(-1)!;
  rows[rows.length - 1] = { ...last, what: `${last.what}: ${ATTEST} connections in ${perl.runs - runsBefore} perl runs` };
  await measure('  of which SO_PEERCRED through perl per batch', 1, async (s) => (await perl.read(s)).pid);
  const pidfd = pidfdGetfd();
  await measure('pidfd_getfd (long-lived perl dups the fd from the broker; needs ptrace rights over it)', 1, (s) => pidfd.read(socketFd(s)!));
  pidfd.stop();
  await measure('`ss -xpn` (same network namespace only)', 1, (s) => ssWithProcesses(inodeOf(socketFd(s)!)));
  await measure('`ss -xn src` + /proc/*/fd scan (same network namespace only)', 1, (s) => ssPeerAndScan(inodeOf(socketFd(s)!), path));
  return rows;
}

async function withExtraProcesses<T>(n: number, f: () => Promise<T>): Promise<T> {
  const sleepers: ChildProcess[] = [];
  for (let i = 0; i < n; i++) sleepers.push(spawn('sleep', ['600'], { stdio: 'ignore' }));
  try {
    return await f();
  } finally {
    for (const s of sleepers) s.kill('SIGKILL');
  }
}

function processCount(): number {
  return readdirSync('/proc').filter((p) => /^\d+$/.test(p)).length;
}

async function main(): Promise<void> {
  const { KubeletCgroups, kubeCgroupsProblem, podPath } = await import('../src/cli/kube-cgroups.js');
  const cgroups = KubeletCgroups.v2();
  const problem = kubeCgroupsProblem(cgroups, 'cgroup v2');
  if (problem) {
    process.stdout.write(`workload-api bench skipped: ${problem}\n`);
    return;
  }
  const { Stack, TD, NODE } = await import('../test/broker/support/stack.js');
  const { startBroker, workloadX509SvidResponse, WORKLOAD_API_DEFAULTS } = await import('../src/broker/index.js');
  const { loadProtos } = await import('../src/grpc/proto-load.js');
  const { WORKLOAD_API_PROTO } = await import('../src/protocol/workload-api.js');
  const stack = await Stack.start({ tmpPrefix: 'bench-wlapi-', namespaces: ['bench'], serviceAccounts: ['bench/app'] });
  const bareServer = new Server();
  const pods = cgroups!;
  try {
    const socketPath = join(stack.dir, 'workload-api', 'socket');
    const broker = await startBroker({ ...stack.brokerConfig({ name: 'wl' }), workloadApiSocketPath: socketPath });
    await broker.whenReady();
    // A second broker whose Workload API reads SO_PEERCRED with a Perl start per batch (the fallback; the way before).
    const batchSocketPath = join(stack.dir, 'workload-api-batch', 'socket');
    const batchBroker = await startBroker({
      ...stack.brokerConfig({ name: 'wl-batch' }),
      workloadApiSocketPath: batchSocketPath,
      workloadApi: { ...WORKLOAD_API_DEFAULTS, peerCredentials: 'batch' },
    });
    await batchBroker.whenReady();
    const uid = await stack.createPod({ namespace: 'bench', name: 'app-0', serviceAccount: 'app', nodeName: NODE });
    const identity = `spiffe://${TD}/ns/bench/sa/app`;
    while (!broker.certs.current(identity) || !batchBroker.certs.current(identity)) await new Promise((r) => setTimeout(r, 10));
    const cgroup = podPath({ driver: 'systemd', qos: 'besteffort', uid, container: { runtime: 'containerd', id: randomBytes(32).toString('hex') } });

    // The bare server: the same bytes the Workload API sends, as one unary answer.
    const type = loadProtos([WORKLOAD_API_PROTO]).root.lookupType('X509SVIDResponse');
    const payload = Buffer.from(type.encode(type.fromObject({ ...workloadX509SvidResponse(broker.certs.current(identity)!, broker.bundle) })).finish());
    const id = (b: Buffer) => b;
    bareServer.addService(
      { Echo: { path: '/bench.Bare/Echo', requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id } },
      { Echo: (_c: ServerUnaryCall<Buffer, Buffer>, cb: sendUnaryData<Buffer>) => cb(null, payload) },
    );
    const bareSocket = join(stack.dir, 'bare.sock');
    await new Promise<void>((resolve, reject) => bareServer.bindAsync(`unix://${bareSocket}`, ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));

    const client = spawn(process.execPath, [fileURLToPath(import.meta.url), '--client', socketPath, batchSocketPath, bareSocket, String(SAMPLES)], { stdio: ['pipe', 'pipe', 'inherit'] });
    pods.place(client.pid!, cgroup);
    const line = await new Promise<string>((resolve) => createInterface({ input: client.stdout! }).once('line', resolve));
    const lat = JSON.parse(line) as Record<'freshWl' | 'freshWlBatch' | 'freshBare' | 'warmWl' | 'warmBare', number[]>;
    const r = (k: keyof typeof lat) => rowOf(k, lat[k]);
    const [fw, fwb, fb, ww, wb] = [r('freshWl'), r('freshWlBatch'), r('freshBare'), r('warmWl'), r('warmBare')];

    const place = (pid: number) => pods.place(pid, cgroup);
    const dir = join(stack.dir, 'attest');
    mkdirSync(dir);
    const base = processCount();
    const rowsBase = await attestationRows(dir, place);
    const rowsMany = await withExtraProcesses(EXTRA_PROCESSES, async () => ({ n: processCount(), rows: await attestationRows(dir, place) }));
    await broker.stop(500);
    await batchBroker.stop(500);

    const f = (x: number) => x.toFixed(2);
    const body = [
      `Run: ${new Date().toISOString().slice(0, 10)}, ${SAMPLES} samples per side, interleaved, one client process in a kubelet-style pod cgroup (cgroup v2, systemd layout); payload ${payload.length} bytes (an X509SVIDResponse: P-256 leaf, root bundle, key).`,
      '',
      '| first message | Workload API p50 / p99 (ms) | bare grpc-js unary, same bytes, p50 / p99 (ms) | ratio p50 |',
      '|---|---|---|---|',
      `| new connection per sample (dial + attestation + first message), SO_PEERCRED helper | ${f(fw.p50)} / ${f(fw.p99)} | ${f(fb.p50)} / ${f(fb.p99)} | ${(fw.p50 / fb.p50).toFixed(2)}x |`,
      `| new connection per sample, a Perl start per batch (the fallback; the broker before) | ${f(fwb.p50)} / ${f(fwb.p99)} | ${f(fb.p50)} / ${f(fb.p99)} | ${(fwb.p50 / fb.p50).toFixed(2)}x |`,
      `| kept connection, new stream (re-check only) | ${f(ww.p50)} / ${f(ww.p99)} | ${f(wb.p50)} / ${f(wb.p99)} | ${(ww.p50 / wb.p50).toFixed(2)}x |`,
      '',
      `Attestation per connection (ms), with the machine's ${base} processes and with ${rowsMany.n} (${EXTRA_PROCESSES} sleepers added), ${ATTEST} connections per row:`,
      '',
      `| mechanism | p50 / p99, ${base} processes | p50 / p99, ${rowsMany.n} processes |`,
      '|---|---|---|',
      ...rowsBase.map((row, i) => `| ${row.what} | ${f(row.p50)} / ${f(row.p99)} | ${f(rowsMany.rows[i]!.p50)} / ${f(rowsMany.rows[i]!.p99)} |`),
    ].join('\n');
    process.stdout.write(`${body}\n`);
    writeDocSection({ root: ROOT, marker: 'workload-api', heading: 'Workload API', body });
  } finally {
    bareServer.forceShutdown();
    pods.cleanup();
    await stack.close();
  }
}

const mode = process.argv[2];
if (mode === '--client') await clientMain(process.argv.slice(3));
else if (mode === '--connect') await connectMain(process.argv.slice(3));
else await main();
