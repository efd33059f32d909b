/**
 * `npm run bench:h2-hpack` — what HPACK decoding of gRPC request headers costs in src/h2/hpack.ts.
 *
 * The header blocks are real: a grpc-js client (the broker's CA client library) calls a raw h2c
 * server here `CALLS` times on one connection, with the CA call's shape (the Istio CA method path,
 * a Bearer token of a projected service-account token's size, a deadline, so a fresh
 * `grpc-timeout` each call); the server keeps each HEADERS block and answers trailers-only. Then
 * one fresh HpackDecoder decodes the connection's blocks in order, `ROUNDS` times (the first block
 * fills the dynamic table, the later ones mostly index it). The baseline, measured in the same run
 * on the same blocks, is `Buffer.toString('latin1')` of each whole block: the cost of merely making
 * a string of that many octets. Reported: µs per block (median of interleaved rounds), the ratio,
 * and the load average.
 */
import { once } from 'node:events';
import net from 'node:net';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import { HpackDecoder, encodeHeaderBlock } from '../src/h2/hpack.js';
import { median } from './report.js';
import { frameBytes } from '../test/h2/support/frame-client.js';

const CALLS = Number(process.env.BENCH_HPACK_CALLS ?? 8);
const ROUNDS = Number(process.env.BENCH_HPACK_ROUNDS ?? 15);
const REPEAT = Number(process.env.BENCH_HPACK_REPEAT ?? 2000);
const PATH = '/istio.v1.auth.IstioCertificateService/CreateCertificate';

/** A raw h2c server keeping every complete request header block, answering each call trailers-only. */
function captureServer(blocks: Buffer[]): net.Server {
  const trailersOnly = encodeHeaderBlock([[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', '0']]);
  return net.createServer((sock) => {
    let buf = Buffer.alloc(0);
    let parts: Buffer[] = [];
    sock.write(frameBytes(4, 0, 0, Buffer.alloc(0)));
    sock.on('error', () => undefined);
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (buf.subarray(0, 3).toString('latin1') === 'PRI') buf = buf.subarray(24);
      while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
        const len = buf.readUIntBE(0, 3);
        const [type, flags, stream] = [buf[3]!, buf[4]!, buf.readUInt32BE(5) & 0x7fffffff];
        let payload = buf.subarray(9, 9 + len);
        buf = buf.subarray(9 + len);
        if (type === 4 && (flags & 1) === 0) sock.write(frameBytes(4, 1, 0, Buffer.alloc(0)));
        if (type !== 1 && type !== 9) continue;
        if (type === 1 && (flags & 0x8) !== 0) payload = payload.subarray(1, payload.length - payload[0]!);
        if (type === 1 && (flags & 0x20) !== 0) payload = payload.subarray(5);
        parts.push(Buffer.from(payload));
        if ((flags & 0x4) === 0) continue;
        blocks.push(Buffer.concat(parts));
        parts = [];
        sock.write(frameBytes(1, 0x5, stream, trailersOnly));
      }
    });
  });
}

async function captureBlocks(): Promise<Buffer[]> {
  const blocks: Buffer[] = [];
  const server = captureServer(blocks);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const client = new grpc.Client(`127.0.0.1:${(server.address() as net.AddressInfo).port}`, grpc.credentials.createInsecure());
  // A projected service-account token is a JWT of about a kilobyte.
  const token = `eyJhbGciOiJSUzI1NiIsImtpZCI6Ik${'x'.repeat(1000)}`;
  for (let i = 0; i < CALLS; i++) {
    const md = new grpc.Metadata();
    md.set('authorization', `Bearer ${token}`);
    md.set('clusterid', 'Kubernetes');
    await new Promise<void>((resolve) => {
      client.makeUnaryRequest(PATH, (b: Buffer) => b, (b: Buffer) => b, Buffer.alloc(600), md, { deadline: Date.now() + 10_000 - i }, () => resolve());
    });
  }
  client.close();
  server.close();
  return blocks;
}

/** µs per connection to decode its first `n` blocks with a fresh decoder, `REPEAT` connections. */
function timeDecode(blocks: readonly Buffer[], n: number): number {
  let fields = 0;
  const start = performance.now();
  for (let r = 0; r < REPEAT; r++) {
    const d = new HpackDecoder({ maxTableSize: 4096, maxHeaderListSize: 16384 });
    for (let i = 0; i < n; i++) d.decode(blocks[i]!, () => fields++);
  }
  const us = ((performance.now() - start) * 1000) / REPEAT;
  if (fields === 0) throw new Error('no fields decoded');
  return us;
}

/** µs per block to make a latin1 string of each whole block. */
function timeLatin1(blocks: readonly Buffer[]): number {
  let chars = 0;
  const start = performance.now();
  for (let r = 0; r < REPEAT; r++) for (const b of blocks) chars += b.toString('latin1').length;
  const us = ((performance.now() - start) * 1000) / (REPEAT * blocks.length);
  if (chars === 0) throw new Error('no bytes');
  return us;
}

async function main(): Promise<void> {
  const blocks = await captureBlocks();
  if (blocks.length !== CALLS) throw new Error(`captured ${blocks.length} blocks, expected ${CALLS}`);
  const firsts: number[] = [];
  const laters: number[] = [];
  const base: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const first = timeDecode(blocks, 1);
    firsts.push(first);
    laters.push((timeDecode(blocks, CALLS) - first) / (CALLS - 1));
    base.push(timeLatin1(blocks));
  }
  const laterOctets = Math.round(blocks.slice(1).reduce((n, b) => n + b.length, 0) / (CALLS - 1));
  const [f, l, b] = [median(firsts), median(laters), median(base)];
  process.stdout.write(
    `h2-hpack: ${CALLS} grpc-js request blocks on one connection (first ${blocks[0]!.length} octets, later ${laterOctets} on average), ${ROUNDS} interleaved rounds x ${REPEAT}\n` +
      `  first block, fresh decoder: ${f.toFixed(2)} µs   later blocks: ${l.toFixed(2)} µs each (medians)\n` +
      `  baseline Buffer.toString('latin1') of a block: ${b.toFixed(2)} µs\n` +
      `  ratios to the baseline: first ${(f / b).toFixed(1)}, later ${(l / b).toFixed(1)}   loadavg ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}\n`,
  );
}

await main();
