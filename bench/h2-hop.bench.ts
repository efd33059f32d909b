/**
 * `npm run bench:h2-hop` — what one more node:http2 process hop costs by itself, with nothing
 * else in it: the floor under the Istio CA front's ratio (`bench:broker-front`).
 *
 * Three processes on loopback, TLS everywhere, the transports the front uses: an **answerer**
 * (a node:http2 server that answers every call at once with a fixed message of the size of a CA
 * answer, as the CA's transport writes it: headers + DATA, trailers one loop turn later), a
 * **relay** (a node:http2 server that forwards each call's message with `H2UnaryChannel` to the
 * answerer and writes the answer back, checking nothing), and the client here (`H2UnaryChannel`)
 * calling the answerer directly and through the relay, one call at a time, interleaved. With
 * `BENCH_HOP_WORK_US`, the answerer spins that long per call (a stand-in for the CA's own work:
 * it does not change the hop, only the ratio).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createSecureServer, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { makeServingMaterial } from '../src/devcluster/serving-cert.js';
import { frame, H2UnaryChannel } from '../src/grpc/index.js';
import { pct, writeDocSection } from './report.js';

const SAMPLES = Number(process.env.BENCH_HOP_SAMPLES ?? 3000);
const WORKS_US = (process.env.BENCH_HOP_WORK_US ?? '0,1000').split(',').map(Number);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** A CA answer's size (leaf, intermediate, root: ~2 KiB of PEM). */
const ANSWER = frame(Buffer.alloc(2100, 0x41));
const OK_HEADERS = { ':status': 200, 'content-type': 'application/grpc' };

/** One message with grpc-status 0, as the CA's transport answers (h2-respond.ts `sendFrame`). */
function answer(stream: ServerHttp2Stream, framed: Buffer): void {
  stream.respond(OK_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  stream.end(framed);
}

/** A TLS node:http2 server calling `onCall(stream, request)` once each request has ended; prints its port. */
async function serve(tls: { readonly certPem: string; readonly keyPem: string }, onCall: (stream: ServerHttp2Stream, request: Buffer) => void): Promise<void> {
  const server = createSecureServer({ cert: tls.certPem, key: tls.keyPem, allowHTTP1: false });
  server.on('stream', (stream) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => onCall(stream, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.stdout.write(`port ${(server.address() as AddressInfo).port}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}

function spin(us: number): void {
  const end = performance.now() + us / 1000;
  while (performance.now() < end);
}

async function child(args: readonly string[]): Promise<{ readonly proc: ChildProcess; readonly port: number }> {
  const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /port (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`${args[0]} exited with ${code}`)));
  });
  return { proc, port };
}

interface Row {
  readonly workUs: number;
  readonly direct: number[];
  readonly relay: number[];
}

async function measure(workUs: number, tlsArgs: readonly string[]): Promise<Row> {
  const answerer = await child(['--answerer', String(workUs), ...tlsArgs]);
  const relay = await child(['--relay', String(answerer.port), ...tlsArgs]);
  const { readFileSync } = await import('node:fs');
  const caPem = readFileSync(tlsArgs[2]!, 'utf8');
  const channel = (port: number) => new H2UnaryChannel({ address: `127.0.0.1:${port}`, rootsPem: caPem, serverName: 'localhost', handshakeTimeoutMs: 10_000 });
  const sides = { direct: channel(answerer.port), relay: channel(relay.port) };
  const message = Buffer.alloc(1500, 0x42);
  const call = (ch: H2UnaryChannel) => ch.call({ path: '/hop', metadata: {}, message, timeoutMs: 10_000, signal: AbortSignal.timeout(10_000) });
  const row: Row = { workUs, direct: [], relay: [] };
  try {
    for (let i = 0; i < 200; i++) for (const ch of Object.values(sides)) await call(ch);
    for (let i = 0; i < SAMPLES; i++) {
      for (const side of i % 2 === 0 ? (['direct', 'relay'] as const) : (['relay', 'direct'] as const)) {
        const t = performance.now();
        const r = await call(sides[side]);
        row[side].push(performance.now() - t);
        if (r.code !== 0) throw new Error(`${side} call failed: ${r.details}`);
      }
    }
  } finally {
    for (const ch of Object.values(sides)) ch.close();
    for (const c of [relay, answerer]) c.proc.stdin!.end();
  }
  row.direct.sort((a, b) => a - b);
  row.relay.sort((a, b) => a - b);
  return row;
}

function render(rows: readonly Row[]): string {
  const ms = (x: number) => `${x.toFixed(3)} ms`;
  const lines = rows.map((r) => {
    const d = pct(r.direct, 50);
    const h = pct(r.relay, 50);
    return `| ${r.workUs} µs | ${ms(d)} | ${ms(h)} | ${ms(h - d)} | ${(h / d).toFixed(2)}x |`;
  });
  return [
    `Measured ${new Date().toISOString().slice(0, 10)} by \`npm run bench:h2-hop\` (2 cores shared with other work: indicative). An answerer (node:http2, TLS, a fixed 2 KiB answer written as the CA's transport writes it), a relay (node:http2 in, \`H2UnaryChannel\` out, no checks) and the client (\`H2UnaryChannel\`), each in its own process on loopback; ${rows[0]?.direct.length ?? 0} calls per side, one at a time, interleaved. The answerer's work per call is a busy wait standing in for a CA's.`,
    '',
    "| answerer's work per call | directly, p50 | through the relay, p50 | the hop | relay / direct |",
    '|---|---|---|---|---|',
    ...lines,
  ].join('\n');
}

const [mode, ...rest] = process.argv.slice(2);
if (mode === '--answerer') {
  const [work, certFile, keyFile] = rest;
  const { readFileSync } = await import('node:fs');
  await serve({ certPem: readFileSync(certFile!, 'utf8'), keyPem: readFileSync(keyFile!, 'utf8') }, (stream) => {
    spin(Number(work));
    answer(stream, ANSWER);
  });
} else if (mode === '--relay') {
  const [upstreamPort, certFile, keyFile, caFile] = rest;
  const { readFileSync } = await import('node:fs');
  const upstream = new H2UnaryChannel({ address: `127.0.0.1:${upstreamPort}`, rootsPem: readFileSync(caFile!, 'utf8'), serverName: 'localhost', handshakeTimeoutMs: 10_000 });
  await serve({ certPem: readFileSync(certFile!, 'utf8'), keyPem: readFileSync(keyFile!, 'utf8') }, (stream, request) => {
    void upstream.call({ path: '/hop', metadata: {}, message: request.subarray(5), timeoutMs: 10_000, signal: AbortSignal.timeout(10_000) }).then((r) => answer(stream, frame(r.message ?? Buffer.alloc(0))));
  });
} else {
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'bench-hop-'));
  try {
    const m = await makeServingMaterial({ hosts: ['127.0.0.1', 'localhost'], nowMs: Date.now() });
    const files = ['cert.pem', 'key.pem', 'ca.pem'].map((f) => join(dir, f));
    writeFileSync(files[0]!, m.certPem);
    writeFileSync(files[1]!, m.keyPem, { mode: 0o600 });
    writeFileSync(files[2]!, m.caCertPem);
    const rows: Row[] = [];
    for (const w of WORKS_US) rows.push(await measure(w, files));
    const body = render(rows);
    process.stdout.write(`${body}\n`);
    if (process.env.BENCH_WRITE_DOCS !== '0') writeDocSection({ root: ROOT, marker: 'h2-hop', heading: 'One node:http2 process hop by itself (`npm run bench:h2-hop`)', body });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
