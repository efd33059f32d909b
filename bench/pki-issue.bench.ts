/**
 * `npm run bench:pki` (also part of `npm run bench`): the in-process leaf issuing rate —
 * CSR PEM parse + signature verify + leaf build + sign + PEM — on one thread (fast DER
 * template), on the LeafIssuerPool (one worker per core), and on the generic @peculiar/x509
 * path, with node:crypto's own P-256 sign and verify rates (cached keys) measured in the same
 * run as the baseline. Scenarios run interleaved round-robin, the median of the rounds is
 * reported. Results go to the "PKI leaf issuing" section of docs/benchmarks.md.
 *
 * BENCH_PKI_ROUNDS (default 16), BENCH_PKI_SECONDS per scenario per round (default 0.4; short slices spread load bursts over all scenarios).
 */
import { createPublicKey, sign, verify } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import {
  caKeyMaterial,
  createCsr,
  createRootCa,
  exportSpkiDer,
  FastLeafIssuer,
  generateKeyPair,
  issueLeafReference,
  LeafIssuerPool,
} from '../src/pki/index.js';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const ROUNDS = Number(process.env.BENCH_PKI_ROUNDS ?? 16);
const SECONDS = Number(process.env.BENCH_PKI_SECONDS ?? 0.4);
const CSR_COUNT = 512;
const ID = 'spiffe://cluster.local/ns/default/sa/sleep';

interface Scenario {
  readonly name: string;
  readonly run: (ms: number) => Promise<number>; // returns ops/s
  readonly rates: number[];
  /** Process CPU time / wall time per round (all threads): 1.0 = one core busy. */
  readonly cpu?: number[];
}

function loopSync(ms: number, fn: (i: number) => void): number {
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let k = 0; k < 50; k++) fn(n++);
    now = performance.now();
  }
  return (n * 1000) / (now - start);
}

async function loopAsync(ms: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let k = 0; k < 5; k++) await fn(n++);
    now = performance.now();
  }
  return (n * 1000) / (now - start);
}

async function poolLoop(pool: LeafIssuerPool, ms: number, csrs: readonly string[], inflight: number): Promise<number> {
  let done = 0;
  let started = 0;
  const start = performance.now();
  const deadline = start + ms;
  await new Promise<void>((resolveAll, reject) => {
    const pump = (): void => {
      while (started - done < inflight && performance.now() < deadline) {
        const i = started++;
        pool.issue({ csr: csrs[i % csrs.length]!, spiffeId: ID, ttlSeconds: 86400 }).then(() => {
          done++;
          if (done === started && performance.now() >= deadline) resolveAll();
          else pump();
        }, reject);
      }
    };
    pump();
  });
  return (done * 1000) / (performance.now() - start);
}

/**
 * The scaling ceiling for the pool: every core runs its own FastLeafIssuer loop in a worker,
 * with its own CSRs and no per-request messages. Returns the summed rate.
 */
async function independentThreads(count: number, ms: number, signer: unknown, csrs: readonly string[]): Promise<number> {
  const pkiUrl = new URL('../src/pki/index.js', import.meta.url).href;
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    (async () => {
      const { FastLeafIssuer } = await import(${JSON.stringify(pkiUrl)});
      const s = workerData.signer;
      const issuer = new FastLeafIssuer({ signer: { ...s, subjectDer: Buffer.from(s.subjectDer), subjectKeyId: s.subjectKeyId ? Buffer.from(s.subjectKeyId) : undefined } });
      const csrs = workerData.csrs;
      const one = (i) => issuer.issue({ csr: csrs[i % csrs.length], spiffeId: ${JSON.stringify(ID)}, ttlSeconds: 86400 });
      for (let i = 0; i < 300; i++) one(i);
      while (Date.now() < workerData.startAt) {}
      let n = 0;
      const t0 = performance.now();
      while (performance.now() - t0 < workerData.ms) for (let k = 0; k < 20; k++) one(n++);
      parentPort.postMessage((n * 1000) / (performance.now() - t0));
    })();
  `;
  const startAt = Date.now() + 400;
  const workers = Array.from({ length: count }, () => new Worker(code, { eval: true, workerData: { signer, csrs, ms, startAt } }));
  try {
    const rates = await Promise.all(workers.map((w) => new Promise<number>((res, rej) => { w.once('message', res); w.once('error', rej); })));
    return rates.reduce((a, b) => a + b, 0);
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const loadStart = loadavg()[0]!.toFixed(1);
  const root = await createRootCa({ subject: 'O=cluster.local', ttlSeconds: 365 * 86400 });
  const material = caKeyMaterial({ cert: root.cert, keyObject: root.privateKey });
  const keys = await Promise.all(Array.from({ length: CSR_COUNT }, () => generateKeyPair()));
  const csrs = keys.map((k) => createCsr({ privateKey: k.privateKey, uri: ID }).pem);
  const fast = new FastLeafIssuer({ signer: material.leafSigner });
  const tbsLike = Buffer.alloc(420, 0x5a);
  const caSig = sign('sha256', tbsLike, material.keyObject);
  const caPub = keys[0]!.publicKey;
  const pubSig = sign('sha256', tbsLike, keys[0]!.privateKey);
  const spkis = keys.map((k) => exportSpkiDer(k.publicKey));
  const sigs = keys.map((k) => sign('sha256', tbsLike, k.privateKey));
  const size = availableParallelism();
  const pool = new LeafIssuerPool({ signer: material.leafSigner, size });
  const pool1 = new LeafIssuerPool({ signer: material.leafSigner, size: 1 });

  const scenarios: Scenario[] = [
    { name: 'node:crypto P-256 sign (cached KeyObject)', rates: [], run: async (ms) => loopSync(ms, () => sign('sha256', tbsLike, material.keyObject)) },
    { name: 'node:crypto P-256 verify (cached KeyObject)', rates: [], run: async (ms) => loopSync(ms, () => verify('sha256', tbsLike, caPub, pubSig)) },
    {
      name: 'node:crypto CSR key import (SPKI DER) + verify, fresh key each time',
      rates: [],
      run: async (ms) => loopSync(ms, (i) => verify('sha256', tbsLike, createPublicKey({ key: spkis[i % CSR_COUNT]!, format: 'der', type: 'spki' }), sigs[i % CSR_COUNT]!)),
    },
    {
      name: 'node:crypto CSR key import (JWK x/y) + verify, fresh key each time',
      rates: [],
      run: async (ms) =>
        loopSync(ms, (i) => {
          const spki = spkis[i % CSR_COUNT]!;
          const key = createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: spki.toString('base64url', 27, 59), y: spki.toString('base64url', 59, 91) }, format: 'jwk' });
          return verify('sha256', tbsLike, key, sigs[i % CSR_COUNT]!);
        }),
    },
    { name: 'fast path, 1 thread (FastLeafIssuer)', rates: [], run: async (ms) => loopSync(ms, (i) => fast.issue({ csr: csrs[i % CSR_COUNT]!, spiffeId: ID, ttlSeconds: 86400 })) },
    { name: `fast path, LeafIssuerPool (${size} workers)`, rates: [], run: (ms) => poolLoop(pool, ms, csrs, 256) },
    { name: `fast path, ${size} worker threads issuing independently (no messages: the pool's ceiling)`, rates: [], run: (ms) => independentThreads(size, ms, material.leafSigner, csrs) },
    { name: 'fast path, LeafIssuerPool (1 worker: the cost of the thread hop)', rates: [], run: (ms) => poolLoop(pool1, ms, csrs, 256) },
    {
      name: 'generic @peculiar/x509 path, 1 thread',
      rates: [],
      run: (ms) => loopAsync(ms, (i) => issueLeafReference({ csr: csrs[i % CSR_COUNT]!, spiffeId: ID, ttlSeconds: 86400, signer: material.leafSigner, nowMs: Date.now() })),
    },
  ];
  if (!verify('sha256', tbsLike, material.keyObject, caSig)) throw new Error('baseline signature does not verify');

  // Warm-up (JIT, worker start-up), then interleaved rounds.
  for (const s of scenarios) await s.run(300);
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of scenarios) {
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      s.rates.push(await s.run(SECONDS * 1000));
      const used = process.cpuUsage(cpu0);
      ((s as { cpu?: number[] }).cpu ??= []).push((used.user + used.system) / 1000 / (performance.now() - t0));
      process.stdout.write(`round ${r + 1}: ${s.name}: ${Math.round(s.rates.at(-1)!)} /s\n`);
    }
  }
  await pool.close();
  await pool1.close();

  const rate = (i: number) => median(scenarios[i]!.rates);
  const cpuOf = (i: number) => median(scenarios[i]!.cpu ?? [0]).toFixed(2);
  const best = (i: number) => {
    const r = scenarios[i]!.rates;
    const k = r.indexOf(Math.max(...r));
    return `${Math.round(r[k]!)} (${(scenarios[i]!.cpu?.[k] ?? 0).toFixed(2)})`;
  };
  const signRate = rate(0);
  const verifyRate = rate(1);
  // The crypto floor of one certificate: one verify (CSR) + one sign (leaf), both with cached keys;
  // and the same with the CSR key imported fresh (as every real CSR brings a new key).
  const floor = 1 / (1 / signRate + 1 / verifyRate);
  const freshFloor = 1 / (1 / signRate + 1 / rate(3));
  const single = rate(4);
  const lines = [
    '| scenario | per second (median) | / floor, cached keys | / floor, fresh CSR key | / fast 1 thread | cores busy (median) | best round /s (its cores busy) |',
    '|---|---:|---:|---:|---:|---:|---:|',
    `| node:crypto P-256 sign, cached key (baseline) | ${Math.round(signRate)} | | | | ${cpuOf(0)} | ${best(0)} |`,
    `| node:crypto P-256 verify, cached key (baseline) | ${Math.round(verifyRate)} | | | | ${cpuOf(1)} | ${best(1)} |`,
    `| ${scenarios[2]!.name} (baseline) | ${Math.round(rate(2))} | | | | ${cpuOf(2)} | ${best(2)} |`,
    `| ${scenarios[3]!.name} (baseline) | ${Math.round(rate(3))} | | | | ${cpuOf(3)} | ${best(3)} |`,
    `| floor, cached keys: 1 verify + 1 sign per cert (derived) | ${Math.round(floor)} | 1.00 | ${(floor / freshFloor).toFixed(2)} | ${(floor / single).toFixed(2)} | | |`,
    `| floor, fresh CSR key: JWK import + verify + sign per cert (derived) | ${Math.round(freshFloor)} | ${(freshFloor / floor).toFixed(2)} | 1.00 | ${(freshFloor / single).toFixed(2)} | | |`,
  ];
  for (let i = 4; i < scenarios.length; i++) {
    const v = rate(i);
    lines.push(`| ${scenarios[i]!.name} | ${Math.round(v)} | ${(v / floor).toFixed(2)} | ${(v / freshFloor).toFixed(2)} | ${(v / single).toFixed(2)} | ${cpuOf(i)} | ${best(i)} |`);
  }
  const when = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const section = [
    START,
    ...lines,
    '',
    `Run ${when}, ${ROUNDS} rounds × ${SECONDS} s per scenario, interleaved, median shown; ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; load average at start ${loadStart}, at end ${loadavg()[0]!.toFixed(1)} (other work on the shared cores lowers every rate; compare ratios).`,
    'One issue = CSR PEM → DER, DER walk, P-256 key import, CSR signature verify, TBSCertificate from the DER template,',
    'ECDSA P-256 sign with the cached CA KeyObject, PEM. CSRs: 512 distinct keys, rotated (every real CSR brings a new key).',
    'The pool keeps 256 requests in flight; it can only scale when the second core is idle ("cores busy" is this process\'s',
    'CPU time over wall time: near 2 for the pool means both cores were ours, near 1 means other work held the second one).',
    '',
    `Reading it: the fast path runs at ${(single / freshFloor).toFixed(2)} of the fresh-key crypto floor — almost all of its time is OpenSSL`,
    'importing the CSR key, verifying with a key used for the first time, and signing; the template, DER walk and PEM are',
    `the rest. Importing and first-using a new P-256 key costs about as much as the verify itself (compare the two verify`,
    'baselines), so the cached-key floor is out of reach for any path that must check a new CSR key. Issue 3 quotes Go',
    `crypto/x509 at ~4,900 certs/s per core and Node's sign at ~32,000/s on an idle machine; this run's sign rate is`,
    `${Math.round(signRate)}/s, so the fast path here corresponds to about ${Math.round((single * 32000) / signRate)}/s per core idle (estimate, scaled by the sign baseline).`,
    END,
  ].join('\n');
  process.stdout.write(`\n${section}\n`);
  writeSection(section);
}

const START = '<!-- bench:pki-issue:start -->';
const END = '<!-- bench:pki-issue:end -->';

function writeSection(section: string): void {
  const file = join(ROOT, 'docs/benchmarks.md');
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    text = '# Benchmarks\n';
  }
  const a = text.indexOf(START);
  const b = text.indexOf(END);
  if (a >= 0 && b > a) writeFileSync(file, text.slice(0, a) + section + text.slice(b + END.length));
  else writeFileSync(file, `${text.trimEnd()}\n\n## PKI leaf issuing, in process (\`npm run bench:pki\`)\n\n${section}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exitCode = 1;
});
