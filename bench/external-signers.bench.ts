/**
 * `npm run bench:external-signers` — CreateCertificate through the CA on the `istio-upstream`
 * and `module:` signers against the same CA on its local `cacerts` signer, in the same run. One
 * devcluster; the CAs over TLS in this process (main-thread signing), ztunnel impersonating a pod
 * on its node (TokenReview cached, the node authorizer on every call):
 * - local: `cacerts` with a plug-in CA (root -> intermediate, P-256);
 * - upstream directly: a `certbroker ca` *process* on the same plug-in CA (CA_SIGNING_WORKERS=0),
 *   called by the client itself (what the registration authority adds is the difference);
 * - istio-upstream: a CA in this process forwarding to that upstream process (a pod-bound RA token,
 *   CA_TRUSTED_REGISTRATION_AUTHORITIES on the upstream);
 * - module: examples/signer-module.mjs (its own P-256 root, leaves built with @peculiar/x509),
 *   plus the CA's CSR verification and result check.
 * Latency and throughput as bench/signer-compare.ts measures them (the other signer benches too); ratios to the local signer. The
 * upstream process's CPU per certificate is read from /proc during the RA's share of the latency run.
 * BENCH_EXT_SAMPLES (300), BENCH_EXT_INFLIGHT (16), BENCH_EXT_SECONDS (3), BENCH_EXT_ROUNDS (3);
 * BENCH_EXT_DOCS overrides the file written.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadSignerModule, type SignerConfig } from '../src/ca/index.js';
import { Scratch } from '../test/support/scratch.js';
import { caClient, CA_NAMESPACE, CA_SA, startCaEnv, TD, waitForIndex } from '../test/ca/support/ca-env.js';
import { startCaProcess, type CaProcess } from '../test/ca/support/ca-process.js';
import { makePluginCa, newCsr, writeCacerts } from '../test/ca/support/pki-fixtures.js';
import { compareSides, comparisonRows, type Side } from './signer-compare.js';
import { writeDocSection } from './report.js';
import { procCpuSeconds } from './proc-cpu.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SAMPLES = Number(process.env.BENCH_EXT_SAMPLES ?? 300);
const INFLIGHT = Number(process.env.BENCH_EXT_INFLIGHT ?? 16);
const SECONDS = Number(process.env.BENCH_EXT_SECONDS ?? 3);
const ROUNDS = Math.max(1, Number(process.env.BENCH_EXT_ROUNDS ?? 3));
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;
const RA_SA = 'certbroker-ra';

async function main(): Promise<void> {
  const scratch = Scratch.create('cb-bench-ext-');
  const env = await startCaEnv();
  const sides: Side[] = [];
  let upstream: CaProcess | undefined;
  try {
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    await env.createPod({ namespace: CA_NAMESPACE, name: 'certbroker-ra-0', serviceAccount: RA_SA, node: 'node-b' });
    const plugin = await makePluginCa('Bench');
    const cacerts = scratch.path('cacerts');
    await mkdir(cacerts);
    await writeCacerts(cacerts, plugin);
    const kubeconfig = scratch.path('kubeconfig');
    const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer], expirationSeconds: 48 * 3600 });
    await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
    upstream = await startCaProcess(scratch.path('.'), ['--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', 'off', '--signer', 'cacerts', '--cacerts-dir', cacerts], {
      CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1',
      CA_SIGNING_WORKERS: '0',
      CA_TRUSTED_REGISTRATION_AUTHORITIES: `${CA_NAMESPACE}/${RA_SA}`,
    });
    const rootFile = scratch.path('upstream-root.pem');
    await writeFile(rootFile, plugin.root.pem);
    const tokenFile = scratch.path('ra-token');
    await writeFile(tokenFile, await env.token({ namespace: CA_NAMESPACE, serviceAccount: RA_SA, pod: 'certbroker-ra-0' }));
    const example = join(ROOT, 'examples/signer-module.mjs');
    const configs: Array<[string, SignerConfig]> = [
      ['local (cacerts)', { kind: 'cacerts', dir: cacerts }],
      ['istio-upstream (RA -> upstream process)', { kind: 'istio-upstream', address: `127.0.0.1:${upstream.port}`, rootCertFile: rootFile, tokenFile, clusterId: 'Kubernetes', tlsServerName: 'localhost', timeoutMs: 10_000 }],
      ['module (examples/signer-module.mjs)', { kind: 'module', module: await loadSignerModule(example), specifier: example, timeoutMs: 10_000 }],
    ];
    for (const [name, signer] of configs) {
      const ca = await env.startCa({ signer, signingWorkers: 0 });
      await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
      sides.push({ name, client: caClient(ca.port, ca.rootsPem()) });
    }
    // The upstream itself, called directly, on the same footing as the others (a client of this process).
    sides.splice(1, 0, { name: 'upstream process directly (cacerts)', client: caClient(upstream.port, plugin.root.pem) });
    const token = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const csrs = await Promise.all(Array.from({ length: 64 }, () => newCsr(SLEEP)));
    const pid = upstream.child.pid!;
    let before = 0;
    let upstreamCpuMs = 0;
    // The upstream signs for two sides in the latency run (directly and through the RA).
    const onLatencyRun = (phase: 'start' | 'end') => {
      if (phase === 'start') before = procCpuSeconds(pid);
      else upstreamCpuMs = ((procCpuSeconds(pid) - before) / (2 * SAMPLES)) * 1000;
    };
    const result = await compareSides(sides, { token, impersonate: SLEEP, csrs, samples: SAMPLES, inflight: INFLIGHT, seconds: SECONDS, rounds: ROUNDS, onLatencyRun });
    const body = [
      `Measured ${new Date().toISOString().slice(0, 10)} by \`npm run bench:external-signers\` (2 cores shared with other work: indicative). The devcluster, the CAs (TLS, http2 transport, signing on the main thread) and the grpc-js client in the bench process; the upstream a \`certbroker ca\` process on the same plug-in CA (P-256 root -> intermediate). Latency: ${SAMPLES} calls per side, one at a time, interleaved. Throughput: ${INFLIGHT} in flight for ${SECONDS} s per side, median of ${ROUNDS} rounds alternating the order; the ratio is the median per-round ratio to the local signer.`,
      '',
      '| signer | latency p50 (ms) | latency p99 (ms) | certificates/s | throughput vs local |',
      '|---|---|---|---|---|',
      ...comparisonRows(sides, result, 0),
      '',
      `The upstream process's own CPU per certificate (during the latency run): ${upstreamCpuMs.toFixed(2)} ms.`,
    ].join('\n');
    process.stdout.write(`${body}\n`);
    writeDocSection({ root: ROOT, marker: 'external-signers', heading: 'CA on the istio-upstream and module signers vs the local signer (`npm run bench:external-signers`)', body, ...(process.env.BENCH_EXT_DOCS ? { file: process.env.BENCH_EXT_DOCS } : {}) });
  } finally {
    for (const side of sides) side.client.close();
    await env.close();
    await upstream?.stop();
    await scratch.remove();
  }
}

await main();
