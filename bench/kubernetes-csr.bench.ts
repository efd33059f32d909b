/**
 * `npm run bench:kubernetes-csr` — CreateCertificate through the CA on the Kubernetes CSR API
 * (create, self-approve, watch for the certificate, verify, delete; signed by `certbroker
 * k8s-signer`) against the same CA on its local signer, in the same run. One devcluster (HTTPS,
 * RBAC of deploy/ + components/kubernetes-csr); a plug-in CA (root -> intermediate, P-256) that the
 * local CA signs with directly and the k8s-signer signs with; all in this process. A ztunnel
 * token impersonates a pod on its node (TokenReview cached, node authorizer on every call); the
 * CSRs name the identity.
 *
 * Latency: BENCH_CSR_SAMPLES (default 200) calls per side, one at a time, interleaved, with
 * BENCH_CSR_SETTLE_MS (default 30) unmeasured after each call: the CSR path leaves work behind in
 * this process (its delete, watch events to both informers) that would otherwise be measured in
 * the local side's next call (its p50 was ~10x the step-ca bench's local p50 without it).
 * Throughput: BENCH_CSR_INFLIGHT (default 16) in flight for BENCH_CSR_SECONDS (default 3) per
 * side, BENCH_CSR_ROUNDS (default 3) rounds alternating the order; the median per-round ratio to
 * the CSR path is reported, with the API requests one certificate costs. BENCH_CSR_DOCS overrides
 * the file written.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { readK8sSignerConfig, startK8sSigner } from '../src/k8s-signer/index.js';
import { identityObjectsOf, renderDeployWith } from '../test/deploy/manifests.js';
import { caClient, startCaEnv, TD, waitForIndex } from '../test/ca/support/ca-env.js';
import { makePluginCa, newCsr, writeCacerts } from '../test/ca/support/pki-fixtures.js';
import { Scratch } from '../test/support/scratch.js';
import { writeDocSection } from './report.js';
import { compareSides, comparisonRows, type Side } from './signer-compare.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SAMPLES = Number(process.env.BENCH_CSR_SAMPLES ?? 200);
const INFLIGHT = Number(process.env.BENCH_CSR_INFLIGHT ?? 16);
const SECONDS = Number(process.env.BENCH_CSR_SECONDS ?? 3);
const ROUNDS = Math.max(1, Number(process.env.BENCH_CSR_ROUNDS ?? 3));
const SETTLE_MS = Number(process.env.BENCH_CSR_SETTLE_MS ?? 30);
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;
const SIGNER = 'certbroker.io/spiffe';

async function main(): Promise<void> {
  const scratch = Scratch.create('cb-bench-csr-');
  const env = await startCaEnv();
  const sides: Side[] = [];
  const stops: Array<() => Promise<void>> = [];
  try {
    await env.cluster.apply(identityObjectsOf(await renderDeployWith(['components/kubernetes-csr'])));
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    const plugin = await makePluginCa('Bench');
    const cacerts = scratch.path('cacerts');
    mkdirSync(cacerts);
    await writeCacerts(cacerts, plugin);
    const signerToken = await env.token({ namespace: 'istio-system', serviceAccount: 'certbroker-k8s-signer', audiences: [env.cluster.issuer] });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromString(env.cluster.kubeconfigYaml({ token: signerToken }));
    const signer = await startK8sSigner({ config: readK8sSignerConfig({ signerName: SIGNER, cacertsDir: cacerts, opsAddress: 'off' }, {}), kubeConfig });
    stops.push(() => signer.stop());
    const local = await env.startCa({ signer: { kind: 'cacerts', dir: cacerts }, signingWorkers: 0 });
    const csrCa = await env.startCa({ signer: { kind: 'kubernetes-csr', signerName: SIGNER, autoApprove: true, rootsPem: plugin.root.pem } });
    for (const [name, ca] of [['local (cacerts, main thread)', local], ['kubernetes-csr (k8s-signer, auto-approve)', csrCa]] as const) {
      await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
      sides.push({ name, client: caClient(ca.port, plugin.root.pem) });
    }
    const token = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    const csrs = await Promise.all(Array.from({ length: 64 }, () => newCsr(SLEEP)));
    const result = await compareSides(sides, { token, impersonate: SLEEP, csrs, samples: SAMPLES, inflight: INFLIGHT, seconds: SECONDS, rounds: ROUNDS, settleMs: SETTLE_MS });
    const body = [
      `Measured ${new Date().toISOString().slice(0, 10)} by \`npm run bench:kubernetes-csr\` (2 cores shared with other work: indicative). The devcluster (HTTPS, the RBAC of deploy/ + components/kubernetes-csr), both CAs (TLS, http2 transport, signing on the main thread), \`certbroker k8s-signer\` and the grpc-js client all in the bench process; the same P-256 intermediate signs on both sides. Per certificate the CSR path makes four API calls (create, approve, the status write by the k8s-signer, delete) and four watch events (added, approved, issued, deleted) reach the CA; the CA and the k8s-signer send these over kept-alive TLS connections (their CsrClient: KeptAliveAgents in src/kube/abortable-http.ts; before, client-node made a TLS connection per request). Latency: ${SAMPLES} calls per side, one at a time, interleaved, ${SETTLE_MS} ms after each (unmeasured) so the CSR path's delete and watch events do not land in the local call. Throughput: ${INFLIGHT} in flight for ${SECONDS} s per side, median of ${ROUNDS} rounds alternating the order; the ratio is the median per-round ratio to the CSR path.`,
      '',
      '| signer | latency p50 (ms) | latency p99 (ms) | certificates/s | throughput vs kubernetes-csr |',
      '|---|---|---|---|---|',
      ...comparisonRows(sides, result, sides.length - 1),
    ].join('\n');
    process.stdout.write(`${body}\n`);
    writeDocSection({ root: ROOT, marker: 'kubernetes-csr', heading: 'CA on the Kubernetes CSR API vs the local signer (`npm run bench:kubernetes-csr`)', body, ...(process.env.BENCH_CSR_DOCS ? { file: process.env.BENCH_CSR_DOCS } : {}) });
  } finally {
    for (const side of sides) side.client.close();
    await env.close();
    for (const s of stops) await s();
    await scratch.remove();
  }
}

await main();
