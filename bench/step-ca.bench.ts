/**
 * `npm run bench:step-ca` — CreateCertificate through the CA on the step-ca signer against the
 * same CA on its local signer, in the same run. One devcluster; one real step-ca (built from
 * Debian's smallstep sources, test/support/step-ca.ts); two CAs over TLS in this process, both
 * signing with the same root and intermediate (`certbroker certs`, P-256): `cacerts` (local, on the
 * main thread and with the default worker pool) and `step-ca` (the same intermediate, in step-ca).
 * A ztunnel token impersonates a pod on its node, so TokenReview is cached and the node authorizer
 * runs on every call; the CSRs name the identity (step-ca checks that).
 *
 * Latency: BENCH_STEP_CA_SAMPLES (default 300) calls per side, one at a time, interleaved.
 * Throughput: BENCH_STEP_CA_INFLIGHT (default 16) calls in flight for BENCH_STEP_CA_SECONDS
 * (default 3) per side, BENCH_STEP_CA_ROUNDS (default 3) rounds alternating which side goes first;
 * the median per-round ratio is reported. step-ca's CPU per certificate is read from /proc.
 * Skipped, with the reason, where step-ca cannot be built. BENCH_STEP_CA_DOCS overrides the file written.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SIGNING_WORKERS, type SignerConfig } from '../src/ca/index.js';
import { Scratch } from '../test/support/scratch.js';
import { startStepCa, stepCaMissing } from '../test/support/step-ca.js';
import { caClient, startCaEnv, waitForIndex, TD } from '../test/ca/support/ca-env.js';
import { newCsr } from '../test/ca/support/pki-fixtures.js';
import { writeDocSection } from './report.js';
import { procCpuSeconds } from './proc-cpu.js';
import { compareSides, comparisonRows, type Side } from './signer-compare.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SAMPLES = Number(process.env.BENCH_STEP_CA_SAMPLES ?? 300);
const INFLIGHT = Number(process.env.BENCH_STEP_CA_INFLIGHT ?? 16);
const SECONDS = Number(process.env.BENCH_STEP_CA_SECONDS ?? 3);
const ROUNDS = Math.max(1, Number(process.env.BENCH_STEP_CA_ROUNDS ?? 3));
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;

async function main(): Promise<void> {
  const missing = stepCaMissing();
  if (missing) {
    process.stdout.write(`step-ca bench skipped: ${missing}\n`);
    return;
  }
  const scratch = Scratch.create('cb-bench-step-ca-');
  const step = await startStepCa(scratch.path('step'), { provisioners: [{ name: 'certbroker', maxTlsCertDuration: '168h' }] });
  const env = await startCaEnv();
  const sides: Side[] = [];
  try {
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    const pki = scratch.path('step/pki');
    const p = step.provisioners.get('certbroker')!;
    const configs: Array<[string, SignerConfig, number]> = [
      ['local (cacerts, main thread)', { kind: 'cacerts', dir: pki }, 0],
      [`local (cacerts, ${DEFAULT_SIGNING_WORKERS} workers)`, { kind: 'cacerts', dir: pki }, DEFAULT_SIGNING_WORKERS],
      ['step-ca', { kind: 'step-ca', url: step.url, rootFile: step.rootFile, provisioner: p.name, provisionerKeyFile: p.keyFile }, 0],
    ];
    for (const [name, signer, signingWorkers] of configs) {
      const ca = await env.startCa({ signer, signingWorkers });
      await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
      sides.push({ name, client: caClient(ca.port, ca.rootsPem()) });
    }
    const token = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const csrs = await Promise.all(Array.from({ length: 64 }, () => newCsr(SLEEP)));
    let cpuBefore = 0;
    let cpuAfter = 0;
    const onLatencyRun = (phase: 'start' | 'end') => (phase === 'start' ? (cpuBefore = procCpuSeconds(step.pid())) : (cpuAfter = procCpuSeconds(step.pid())));
    const result = await compareSides(sides, { token, impersonate: SLEEP, csrs, samples: SAMPLES, inflight: INFLIGHT, seconds: SECONDS, rounds: ROUNDS, onLatencyRun });
    const stepCpuPerCertMs = ((cpuAfter - cpuBefore) / SAMPLES) * 1000;
    const fmt = (n: number) => n.toFixed(2);
    const rows = comparisonRows(sides, result, sides.length - 1);
    const body = [
      `Measured ${new Date().toISOString().slice(0, 10)} by \`npm run bench:step-ca\` (2 cores shared with other work: indicative). The devcluster, the three CAs (TLS, http2 transport) and the grpc-js client in the bench process; step-ca 0.19 (Debian's sources) in its own process, the same P-256 intermediate as the local signer. Latency: ${SAMPLES} calls per side, one at a time, interleaved. Throughput: ${INFLIGHT} in flight for ${SECONDS} s per side, median of ${ROUNDS} rounds alternating the order; the ratio is the median per-round ratio to step-ca.`,
      '',
      '| signer | latency p50 (ms) | latency p99 (ms) | certificates/s | throughput vs step-ca |',
      '|---|---|---|---|---|',
      ...rows,
      '',
      `step-ca's own CPU per certificate (during the latency run): ${fmt(stepCpuPerCertMs)} ms.`,
    ].join('\n');
    process.stdout.write(`${body}\n`);
    writeDocSection({ root: ROOT, marker: 'step-ca', heading: 'CA on the step-ca signer vs the local signer (`npm run bench:step-ca`)', body, ...(process.env.BENCH_STEP_CA_DOCS ? { file: process.env.BENCH_STEP_CA_DOCS } : {}) });
  } finally {
    for (const side of sides) side.client.close();
    await env.close();
    await step.stop();
    await scratch.remove();
  }
}

await main();
