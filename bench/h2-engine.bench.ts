/**
 * `npm run bench:h2-engine` — the HTTP/2 server's own cost per gRPC-shaped call: a bare echo
 * handler (read the request body, answer a 1.2 KB framed message with grpc-status 0 in trailers)
 * on certbroker's engine (src/h2, over tls.Server) and on node:http2 (nghttp2), both in this
 * process, TLS with ALPN h2, loaded by nghttp2's h2load (`-n 40000 -c 4 -m 16`, a POST body file)
 * from a separate process. Per-request CPU is this process's `process.cpuUsage()` over the run
 * divided by the requests h2load completed. Runs alternate (node, engine, node, engine, …;
 * BENCH_H2_ROUNDS pairs, default 3) so both see the same machine; reported: µs per request for
 * each (median), the same-run ratio, requests/s, and the load average before and after.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createSecureServer, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server as TlsServer } from 'node:tls';
import { encodeHeaderBlock } from '../src/h2/hpack.js';
import { H2Server } from '../src/h2/server.js';
import { OpensslCerts } from '../test/support/openssl-certs.js';
import { median } from './report.js';

const ROUNDS = Number(process.env.BENCH_H2_ROUNDS ?? 3);
const REQUESTS = Number(process.env.BENCH_H2_REQUESTS ?? 40_000);

/** The answer: a gRPC frame of a certificate chain's size. */
const ANSWER = Buffer.alloc(5 + 1200, 0x41);
ANSWER[0] = 0;
ANSWER.writeUInt32BE(1200, 1);

function nodeServer(cert: string, key: string): TlsServer {
  const okHeaders = Object.freeze({ ':status': 200, 'content-type': 'application/grpc' });
  const okTrailers = Object.freeze({ 'grpc-status': '0' });
  const server = createSecureServer({ cert, key, allowHTTP1: false });
  server.on('stream', (stream: ServerHttp2Stream) => {
    let n = 0;
    stream.on('data', (c: Buffer) => (n += c.length));
    stream.once('end', () => {
      stream.respond(okHeaders, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers(okTrailers));
      stream.end(ANSWER);
    });
  });
  return server;
}

function engineServer(cert: string, key: string): TlsServer {
  const head = encodeHeaderBlock([
    [':status', '200'],
    ['content-type', 'application/grpc'],
  ]);
  const trailers = encodeHeaderBlock([['grpc-status', '0']]);
  return new H2Server({
    tls: { cert, key },
    onStream: (stream) => {
      let n = 0;
      stream.ondata = (c) => (n += c.length);
      stream.onend = () => stream.reply(head, ANSWER, trailers);
    },
  }).tls;
}

async function h2load(port: number, bodyFile: string): Promise<{ done: number; failed: number }> {
  const args = ['-n', String(REQUESTS), '-c', '4', '-m', '16', '-t', '1', '-d', bodyFile, '-H', 'content-type: application/grpc', '-H', 'te: trailers', `https://127.0.0.1:${port}/bench.Echo/Call`];
  const child = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  await new Promise((resolve) => child.once('exit', resolve));
  const m = /requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed/u.exec(out);
  if (!m) throw new Error(`h2load output not understood:\n${out}`);
  return { done: Number(m[2]), failed: Number(m[3]) };
}

async function measure(server: TlsServer, bodyFile: string): Promise<{ usPerRequest: number; rate: number; failed: number }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  try {
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    const r = await h2load(port, bodyFile);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    return { usPerRequest: (cpu.user + cpu.system) / Math.max(1, r.done), rate: r.done / seconds, failed: r.failed };
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

async function main(): Promise<void> {
  execFileSync('h2load', ['--version'], { stdio: 'ignore' });
  const dir = mkdtempSync(join(tmpdir(), 'bench-h2-'));
  try {
    const pki = new OpensslCerts(dir);
    const leaf = pki.issue('localhost', pki.ca('bench-root'), { san: 'DNS:localhost,IP:127.0.0.1', eku: 'serverAuth' });
    const bodyFile = join(dir, 'body');
    const body = Buffer.alloc(5 + 900, 0x42);
    body[0] = 0;
    body.writeUInt32BE(900, 1);
    writeFileSync(bodyFile, body);
    const load0 = loadavg()[0]!;
    const node: number[] = [];
    const engine: number[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, make, into] of [
        ['node:http2', nodeServer, node],
        ['src/h2', engineServer, engine],
      ] as const) {
        const m = await measure(make(leaf.certPem, leaf.keyPem), bodyFile);
        into.push(m.usPerRequest);
        process.stdout.write(`round ${r + 1} ${name}: ${m.usPerRequest.toFixed(1)} µs CPU/request, ${m.rate.toFixed(0)} requests/s, ${m.failed} failed\n`);
      }
    }
    const n = median(node);
    const e = median(engine);
    process.stdout.write(
      `median CPU per request: node:http2 ${n.toFixed(1)} µs, src/h2 ${e.toFixed(1)} µs (src/h2 / node:http2 = ${(e / n).toFixed(2)}); load average ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)}\n`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:h2-engine failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
