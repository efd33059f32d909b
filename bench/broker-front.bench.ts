/**
 * `npm run bench:broker-front` — the node broker's Istio CA front (docs/ztunnel.md) against
 * calling the CA directly, same client, same run.
 *
 * A real devcluster runs in this process; the CA runs as `certbroker ca` in a child process (TLS,
 * its default transport, 1 signing worker, the stack's self-signed root) and the broker as
 * `certbroker broker` in another (its front on a free port and its default HTTP/2 engine,
 * ISTIO_CA_FRONT_TRANSPORT=h2), as on a node: every side crosses a
 * process boundary to reach the CA. One client — certbroker's `IstioCaClient.forwardCsr`: a kept gRPC channel,
 * `authorization: Bearer`, `clusterid`, `ImpersonatedIdentity`, the answer checked — calls
 * CreateCertificate for the same workload identity two ways:
 *
 * - **direct**: to the CA, with the broker pod's token (what the front forwards);
 * - **front**: to the front on localhost, with a ztunnel pod's token (what released ztunnel does):
 *   the front reviews the token (cached), authorizes on the node, verifies the CSR and forwards;
 * - **relay**: a bare grpc-js relay in a child process that forwards the request bytes and
 *   metadata to the CA and the answer back, checking nothing, with the broker token — what a
 *   second TLS gRPC hop costs by itself on grpc-js;
 * - **h2 relay**: the same relay on node:http2 in and out (a node:http2 server, `H2UnaryChannel`
 *   to the CA), checking nothing — what the extra process hop costs by itself on node:http2 (the
 *   front's floor when it ran on node:http2, as `ISTIO_CA_FRONT_TRANSPORT=http2` still can).
 *
 * CSRs (P-256, as ztunnel makes them) are made before the clock starts and shared by both sides.
 * 1. Latency: one call at a time, the two sides interleaved, p50/p99 and the ratio.
 * 2. Throughput: `CONCURRENCY` calls in flight for `BATCH` calls, sides in a rotating order over `ROUNDS`, median.
 * Goal: front <= 1.3x direct. BENCH_FRONT_SAMPLES (default 400) latency samples per side.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { median, pct, writeDocSection } from './report.js';
import { procCpuSeconds } from './proc-cpu.js';
import { until } from '../test/support/until.js';

const SAMPLES = Number(process.env.BENCH_FRONT_SAMPLES ?? 400);
const CONCURRENCY = 8;
const BATCH = 200;
const ROUNDS = 7;
const CSRS = 64;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const RUN = fileURLToPath(new URL('../src/broker/run.js', import.meta.url));

type Side = 'direct' | 'relay' | 'h2relay' | 'front';
type Middle = Exclude<Side, 'direct'>;
const SIDES: readonly Side[] = ['direct', 'relay', 'h2relay', 'front'];

interface Result {
  readonly latency: Readonly<Record<Side, number[]>>;
  readonly throughput: Array<{ readonly side: Side; readonly perSecond: number }>;
  /** CPU (user + system) the middle process spent per call during its throughput rounds, ms. */
  readonly cpuPerCall: Readonly<Record<Middle, number>>;
}

/** `--relay CA_PORT CERT KEY ROOTS`: the bare grpc-js relay (a child process), prints its port. */
async function relay(args: readonly string[]): Promise<void> {
  const [caPort, certFile, keyFile, rootsFile] = args;
  const { readFileSync } = await import('node:fs');
  const { Client, Server, ServerCredentials, credentials } = await import('@grpc/grpc-js');
  const path = '/istio.v1.auth.IstioCertificateService/CreateCertificate';
  const same = (b: Buffer) => b;
  const upstream = new Client(`127.0.0.1:${caPort}`, credentials.createSsl(readFileSync(rootsFile!)), { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' });
  const server = new Server();
  const method = { path, requestStream: false, responseStream: false, requestSerialize: same, requestDeserialize: same, responseSerialize: same, responseDeserialize: same };
  server.addService({ CreateCertificate: method }, {
    CreateCertificate: (call: import('@grpc/grpc-js').ServerUnaryCall<Buffer, Buffer>, cb: import('@grpc/grpc-js').sendUnaryData<Buffer>) =>
      upstream.makeUnaryRequest(path, same, same, call.request, call.metadata, (err, res) => cb(err, res)),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', ServerCredentials.createSsl(null, [{ cert_chain: readFileSync(certFile!), private_key: readFileSync(keyFile!) }]), (e, p) => (e ? reject(e) : resolve(p))),
  );
  process.stdout.write(`relay ${port}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}

/** `--h2-relay CA_PORT CERT KEY ROOTS`: the bare node:http2 relay (a child process), prints its port. */
async function h2Relay(args: readonly string[]): Promise<void> {
  const [caPort, certFile, keyFile, rootsFile] = args;
  const { readFileSync } = await import('node:fs');
  const { createSecureServer } = await import('node:http2');
  const { H2UnaryChannel, frame, grpcMessage } = await import('../src/grpc/index.js');
  const upstream = new H2UnaryChannel({ address: `127.0.0.1:${caPort}`, rootsPem: readFileSync(rootsFile!, 'utf8'), serverName: 'localhost', handshakeTimeoutMs: 10_000 });
  const server = createSecureServer({ cert: readFileSync(certFile!), key: readFileSync(keyFile!), allowHTTP1: false });
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      const metadata = { authorization: String(headers.authorization), clusterid: String(headers.clusterid) };
      void upstream.call({ path: String(headers[':path']), metadata, message: Buffer.concat(chunks).subarray(5), timeoutMs: 10_000, signal: new AbortController().signal }).then((r) => {
        if (r.code !== 0) return stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': r.code, 'grpc-message': grpcMessage(r.details) }, { endStream: true });
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
        stream.end(frame(r.message!));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`relay ${(server.address() as import('node:net').AddressInfo).port}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}

/** Starts `bench --<flag> ...` as a child process and resolves with it and the port it printed. */
async function startRelay(flag: string, args: readonly string[]): Promise<{ readonly proc: ChildProcess; readonly port: number }> {
  const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), flag, ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  await until(() => /relay \d+/.test(out), `the ${flag} relay`, { timeoutMs: 60_000, pollMs: 10 });
  return { proc, port: Number(/relay (\d+)/.exec(out)![1]) };
}

async function measure(): Promise<Result> {
  const { Stack, TD, NODE, BROKER_NS, BROKER_SA } = await import('../test/broker/support/stack.js');
  const { IstioCaClient } = await import('../src/broker/index.js');
  const { createCsr, generateKeyPair } = await import('../src/pki/index.js');
  const stack = await Stack.start({ tmpPrefix: 'bench-front-', namespaces: ['shop'], serviceAccounts: ['shop/cart'] });
  let child: ChildProcess | undefined;
  const relays: ChildProcess[] = [];
  let caChild: ChildProcess | undefined;
  try {
    await stack.createPod({ namespace: BROKER_NS, name: 'ztunnel-bench', serviceAccount: 'ztunnel', nodeName: NODE });
    await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    await until(() => stack.ca.podIndex('Kubernetes')?.getPod({ namespace: 'shop', name: 'cart-0' }) !== undefined, 'CA pod index', { timeoutMs: 60_000, pollMs: 10 });

    // The CA in its own process, on the stack's root (istio-ca-secret), trusting the broker as a node agent.
    const caKubeconfig = join(stack.dir, 'ca.kubeconfig');
    await stack.dc.writeKubeconfig(caKubeconfig, { token: stack.dc.adminToken, name: 'admin' });
    const { startCaProcess } = await import('../test/ca/support/ca-process.js');
    const caProc = await startCaProcess(stack.dir, [], {
      KUBECONFIG: caKubeconfig,
      CA_GRPC_ADDRESS: '127.0.0.1:0',
      CA_OPS_ADDRESS: 'off',
      CA_SIGNER: 'self-signed',
      CA_NAMESPACE: BROKER_NS,
      CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1',
      CA_TRUSTED_NODE_ACCOUNTS: `${BROKER_NS}/${BROKER_SA}`,
      CA_SIGNING_WORKERS: '1',
    });
    caChild = caProc.child;
    const caPort = caProc.port;

    const { env: brokerEnv, rootFile } = await stack.brokerEnv('b', { caAddress: `127.0.0.1:${caPort}` });
    const env = {
      ...brokerEnv,
      PATH: process.env.PATH ?? '',
      LOG_LEVEL: 'info',
      ISTIO_CA_FRONT_ADDRESS: '127.0.0.1:0',
      // The bench's one caller would otherwise meet the per-caller bounds.
      ISTIO_CA_FRONT_RATE_PER_SECOND: '100000',
      ISTIO_CA_FRONT_BURST: '100000',
      ISTIO_CA_FRONT_MAX_IN_FLIGHT: '1000',
    };
    const proc = spawn(process.execPath, [...(process.env.BENCH_FRONT_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_FRONT_PROF] : []), '--input-type=module', '-e', `import(${JSON.stringify(RUN)}).then((m) => m.runBroker({}))`], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    child = proc;
    let log = '';
    proc.stderr!.on('data', (c: Buffer) => (log += c.toString()));
    await until(() => log.includes('Istio CA front certificate ready') && /"msg":"Istio CA front listening".*"port":\d+/.test(log), 'the front serving', { timeoutMs: 60_000, pollMs: 10 });
    const frontPort = Number(/"msg":"Istio CA front listening".*"port":(\d+)/.exec(log)![1]);

    const serving = await stack.ca.signer.issueServingCertificate({ dnsNames: ['localhost'], ttlSeconds: 3600 });
    await writeFile(join(stack.dir, 'relay-cert.pem'), serving.certChainPem);
    await writeFile(join(stack.dir, 'relay-key.pem'), serving.privateKeyPem.reveal(), { mode: 0o600 });
    const relayArgs = [String(caPort), join(stack.dir, 'relay-cert.pem'), join(stack.dir, 'relay-key.pem'), rootFile];
    const grpcRelay = await startRelay('--relay', relayArgs);
    relays.push(grpcRelay.proc);
    const h2 = await startRelay('--h2-relay', relayArgs);
    relays.push(h2.proc);

    const identity = `spiffe://${TD}/ns/shop/sa/cart`;
    const brokerToken = await stack.podToken(BROKER_NS, BROKER_SA, stack.brokerPod.name);
    const tokens: Record<Side, Awaited<ReturnType<typeof stack.podToken>>> = {
      direct: brokerToken,
      relay: brokerToken,
      h2relay: brokerToken,
      front: await stack.podToken(BROKER_NS, 'ztunnel', 'ztunnel-bench'),
    };
    const clientFor = (address: string, side: Side) =>
      new IstioCaClient({
        address,
        caRootsPem: stack.ca.rootsPem(),
        tlsServerName: 'localhost',
        tokens: { token: async () => tokens[side] },
        clusterId: 'Kubernetes',
        certTtlSeconds: 86_400,
        impersonate: true,
      });
    const clients: Record<Side, InstanceType<typeof IstioCaClient>> = {
      direct: clientFor(`127.0.0.1:${caPort}`, 'direct'),
      relay: clientFor(`127.0.0.1:${grpcRelay.port}`, 'relay'),
      h2relay: clientFor(`127.0.0.1:${h2.port}`, 'h2relay'),
      front: clientFor(`127.0.0.1:${frontPort}`, 'front'),
    };
    const csrs: string[] = [];
    for (let i = 0; i < CSRS; i++) csrs.push(createCsr({ privateKey: (await generateKeyPair()).privateKey, uri: identity }).pem);
    let next = 0;
    const call = (side: Side) =>
      clients[side].forwardCsr({ csrPem: csrs[next++ % CSRS]!, identity, ttlSeconds: 86_400 }, AbortSignal.timeout(30_000));

    for (let i = 0; i < 50; i++) for (const side of SIDES) await call(side);
    const latency: Record<Side, number[]> = { direct: [], relay: [], h2relay: [], front: [] };
    for (let i = 0; i < SAMPLES; i++) {
      // Rotate which side goes first, so none always follows another.
      for (let k = 0; k < SIDES.length; k++) {
        const side = SIDES[(i + k) % SIDES.length]!;
        const t = performance.now();
        await call(side);
        latency[side].push(performance.now() - t);
      }
    }
    const throughput: Result['throughput'] = [];
    const middle: Partial<Record<Side, number>> = { relay: grpcRelay.proc.pid!, h2relay: h2.proc.pid!, front: proc.pid! };
    const cpu: Record<Middle, number> = { relay: 0, h2relay: 0, front: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      // Short rounds, the sides in a rotating order: a burst of other load on the shared box hits all sides alike.
      for (const side of SIDES.map((_, k) => SIDES[(round + k) % SIDES.length]!)) {
        let started = 0;
        const pid = middle[side];
        const cpuBefore = pid === undefined ? 0 : procCpuSeconds(pid) * 1000;
        const t = performance.now();
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (started < BATCH) {
              started++;
              await call(side);
            }
          }),
        );
        throughput.push({ side, perSecond: BATCH / ((performance.now() - t) / 1000) });
        if (pid !== undefined && side !== 'direct') cpu[side] += (procCpuSeconds(pid) * 1000 - cpuBefore) / (BATCH * ROUNDS);
      }
    }
    for (const c of Object.values(clients)) c.close();
    for (const side of SIDES) latency[side].sort((a, b) => a - b);
    return { latency, throughput, cpuPerCall: cpu };
  } finally {
    for (const r of relays) r.stdin?.end();
    for (const c of [child, caChild]) {
      if (c && c.exitCode === null) {
        const exited = new Promise((r) => c.once('exit', r));
        c.kill('SIGTERM');
        await exited;
      }
    }
    await stack.close();
  }
}

function render(r: Result): string {
  const l = r.latency;
  const rate = (side: Side) => median(r.throughput.filter((t) => t.side === side).map((t) => t.perSecond));
  const ms = (x: number) => `${x.toFixed(2)} ms`;
  const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}x`;
  const lat = (p: number) =>
    `| latency p${p} | ${ms(pct(l.direct, p))} | ${ms(pct(l.relay, p))} | ${ms(pct(l.h2relay, p))} | ${ms(pct(l.front, p))} | **${ratio(pct(l.front, p), pct(l.direct, p))}** | ${ratio(pct(l.h2relay, p), pct(l.direct, p))} | ${ratio(pct(l.relay, p), pct(l.direct, p))} |`;
  const rates = `| throughput, ${CONCURRENCY} in flight | ${rate('direct').toFixed(0)} calls/s | ${rate('relay').toFixed(0)} calls/s | ${rate('h2relay').toFixed(0)} calls/s | ${rate('front').toFixed(0)} calls/s | **${ratio(rate('direct'), rate('front'))}** | ${ratio(rate('direct'), rate('h2relay'))} | ${ratio(rate('direct'), rate('relay'))} |`;
  const cpu = (side: Middle) => `${r.cpuPerCall[side].toFixed(2)} ms`;
  return [
    `Measured ${new Date().toISOString().slice(0, 10)} by \`npm run bench:broker-front\` (2 cores shared with other work: indicative). The devcluster and the client in the bench process; the CA as \`certbroker ca\` (its default transport, h2, 1 signing worker), the broker as \`certbroker broker\` (its Istio CA front on its default engine, h2) and two bare relays (no checks: grpc-js in and out; node:http2 in and out) each in a child process. One client (\`IstioCaClient.forwardCsr\`, kept channels) asks for the same impersonated identity directly (broker token), through each relay (broker token) and through the front (ztunnel token). Latency: ${l.direct.length} calls per side, one at a time, interleaved. Throughput: ${CONCURRENCY} in flight, ${BATCH} calls, median of ${ROUNDS} rounds. Goal: front <= 1.3x direct.`,
    '',
    '| | CA directly | grpc-js relay | node:http2 relay | through the front | front / direct | h2 relay / direct | grpc-js relay / direct |',
    '|---|---|---|---|---|---|---|---|',
    lat(50),
    lat(99),
    rates,
    `| CPU of the middle process per call | — | ${cpu('relay')} | ${cpu('h2relay')} | ${cpu('front')} | | | |`,
  ].join('\n');
}

if (process.argv[2] === '--relay') {
  await relay(process.argv.slice(3));
} else if (process.argv[2] === '--h2-relay') {
  await h2Relay(process.argv.slice(3));
} else {
  const body = render(await measure());
  process.stdout.write(`${body}\n`);
  if (process.env.BENCH_WRITE_DOCS !== '0') writeDocSection({ root: ROOT, marker: 'broker-front', heading: 'Istio CA front (broker) vs the CA directly (`npm run bench:broker-front`)', body });
}
