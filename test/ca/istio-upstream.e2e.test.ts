/**
 * `--signer istio-upstream` (registration-authority mode) against a second certbroker CA
 * *process* as the upstream, over a real devcluster: the upstream runs a plug-in CA (root ->
 * intermediate) and trusts the RA's account as a registration authority
 * (CA_TRUSTED_REGISTRATION_AUTHORITIES, as an operator configures it); the RA authenticates and
 * node-authorizes ztunnel as always, forwards with its own pod-bound token and
 * ImpersonatedIdentity, checks the answer and returns it with the upstream root last. Its own
 * serving certificate comes from the upstream too (serving names). Refusals are relayed with
 * ERR_CA_UPSTREAM_REFUSED, a token file that changes is read again, an upstream that is down is
 * UNAVAILABLE and one that hangs DEADLINE_EXCEEDED. The Python grpcio client goes through it.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { status } from '@grpc/grpc-js';
import { loadSignerModule, type CaServer, type SignerConfig } from '../../src/ca/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { REPO_ROOT } from '../support/fixtures.js';
import { startHungServer, silentTlsMaterial } from '../support/hung-server.js';
import { opensslMissing, pythonGrpcMissing } from '../support/tools.js';
import { interopCall, writeCaStubs } from './support/python-interop.js';
import { caClient, CA_NAMESPACE, CA_SA, lastDenialReason, startCaEnv, TD, waitForIndex, type CaEnv } from './support/ca-env.js';
import { startCaProcess, type CaProcess } from './support/ca-process.js';
import { makePluginCa, newCsr, opensslVerifyChain, tempDir, writeCacerts, type PluginCa } from './support/pki-fixtures.js';
import { until } from '../support/until.js';

const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;
const RA_SA = 'certbroker-ra';

let env: CaEnv;
let dir: { path: string; remove: () => Promise<void> };
let plugin: PluginCa;
let upstream: CaProcess;
let rootFile: string;
let tokenFile: string;
let raToken: string;
let ztunnel: string;

before(async () => {
  env = await startCaEnv();
  dir = await tempDir('ca-upstream-');
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  // The RA runs on another node than the workloads it serves.
  await env.createPod({ namespace: CA_NAMESPACE, name: 'certbroker-ra-0', serviceAccount: RA_SA, node: 'node-b' });
  plugin = await makePluginCa('Upstream');
  await mkdir(join(dir.path, 'cacerts'));
  await writeCacerts(join(dir.path, 'cacerts'), plugin);
  const kubeconfig = join(dir.path, 'kubeconfig');
  const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer], expirationSeconds: 48 * 3600 });
  await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
  upstream = await startCaProcess(dir.path, ['--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', 'off', '--signer', 'cacerts', '--cacerts-dir', join(dir.path, 'cacerts')], {
    CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1',
    CA_SIGNING_WORKERS: '0',
    CA_TRUSTED_REGISTRATION_AUTHORITIES: `${CA_NAMESPACE}/${RA_SA}`,
    MAX_WORKLOAD_CERT_TTL_SECONDS: String(2 * 86_400),
  });
  rootFile = join(dir.path, 'upstream-root.pem');
  await writeFile(rootFile, plugin.root.pem);
  raToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: RA_SA, pod: 'certbroker-ra-0' });
  tokenFile = join(dir.path, 'ra-token');
  await writeFile(tokenFile, `${raToken}\n`);
  ztunnel = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
});

after(async () => {
  await upstream?.stop();
  await env?.close();
  await dir?.remove();
});

function upstreamSigner(over: Partial<Extract<SignerConfig, { kind: 'istio-upstream' }>> = {}): SignerConfig {
  return { kind: 'istio-upstream', address: `127.0.0.1:${upstream.port}`, rootCertFile: rootFile, tokenFile, clusterId: 'Kubernetes', tlsServerName: 'localhost', timeoutMs: 5000, ...over };
}

async function startRa(signer: SignerConfig, plaintext = false): Promise<CaServer> {
  const ra = await env.startCa({ signer, ...(plaintext ? { plaintext: true, transport: 'grpc-js' as const } : {}) });
  await waitForIndex(ra, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  return ra;
}

test('certbroker ca --signer istio-upstream (a process, flags): ztunnel gets an SVID through it, the upstream intermediate and root last; the RA serves TLS with a certificate from the upstream; python grpcio too', { skip: opensslMissing() }, async (t) => {
  const kubeconfig = join(dir.path, 'kubeconfig');
  const ra = await startCaProcess(
    dir.path,
    ['--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', 'off', '--signer', 'istio-upstream', '--upstream-address', `127.0.0.1:${upstream.port}`, '--upstream-root-cert-file', rootFile, '--upstream-token-file', tokenFile, '--upstream-cluster-id', 'Kubernetes'],
    { CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1', CA_UPSTREAM_TLS_SERVER_NAME: 'localhost' },
  );
  try {
    const c = caClient(ra.port, plugin.root.pem);
    const r = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP, ttlSeconds: 3600 });
    c.close();
    assert.equal(r.code, undefined, JSON.stringify(r));
    const chain = r.chain!;
    assert.equal(chain.length, 3, 'leaf, upstream intermediate, upstream root');
    assert.equal(checkX509Svid(chain[0]!)?.id, SLEEP);
    assert.equal(chain[1], plugin.intermediate.pem);
    assert.equal(chain[2], plugin.root.pem, "the upstream's roots are the last element");
    assert.match(await opensslVerifyChain(chain), /OK/);

    const skipPy = pythonGrpcMissing();
    if (skipPy) {
      t.diagnostic(`python grpcio part skipped: ${skipPy}`);
      return;
    }
    const py = join(dir.path, 'py');
    await mkdir(py, { recursive: true });
    await writeCaStubs(py);
    await writeFile(join(py, 'csr.pem'), await newCsr());
    await writeFile(join(py, 'token'), ztunnel);
    const res = await interopCall({ stubs: py, target: `127.0.0.1:${ra.port}`, rootsFile: rootFile, csrFile: join(py, 'csr.pem'), tokenFile: join(py, 'token'), impersonate: SLEEP, ttlSeconds: 7200 });
    assert.ok(res.cert_chain, JSON.stringify(res));
    assert.equal(checkX509Svid(res.cert_chain[0]!)?.id, SLEEP);
    assert.equal(res.cert_chain.at(-1), plugin.root.pem);
    const leaf = new X509Certificate(res.cert_chain[0]!);
    assert.equal(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom), 7200_000 + 120_000, 'the TTL asked reached the upstream');
  } finally {
    assert.equal(await ra.stop(), 0, ra.log.lines.join('\n'));
  }
});

test('istio-upstream: refusals are relayed with ERR_CA_UPSTREAM_REFUSED, a rotated token file is read again, and the RA still node-authorizes first', async () => {
  const ra = await startRa(upstreamSigner());
  const c = caClient(ra.port, ra.rootsPem());
  try {
    assert.equal(ra.rootsPem(), plugin.root.pem, 'the RA serves the upstream root');
    const ok = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    assert.equal(ok.code, undefined, JSON.stringify(ok) + env.logs.filter((l) => /warn|error|serving/.test(l)).join('\n'));

    // The RA's own check: no pod of default/web on ztunnel's node. Generic answer, precise log, nothing forwarded.
    const denied = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: `spiffe://${TD}/ns/default/sa/web` });
    assert.deepEqual([denied.code, denied.errorCode], [status.UNAUTHENTICATED, 'ERR_CA_UNAUTHENTICATED']);
    assert.equal(lastDenialReason(env.logs), 'ERR_CA_NO_POD_ON_NODE');

    // Over the upstream's maximum TTL (2 d; the RA allows 7 d): the upstream's INVALID_ARGUMENT, relayed.
    const long = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP, ttlSeconds: 3 * 86_400 });
    assert.deepEqual([long.code, long.errorCode], [status.INVALID_ARGUMENT, 'ERR_CA_UPSTREAM_REFUSED']);

    // The token file rotates to a token the upstream refuses (an account it does not trust): read again, refusal relayed.
    await env.createPod({ namespace: 'default', name: 'intruder-0', serviceAccount: 'intruder', node: 'node-b' });
    await writeFile(tokenFile, await env.token({ namespace: 'default', serviceAccount: 'intruder', pod: 'intruder-0' }));
    const refused = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    assert.deepEqual([refused.code, refused.errorCode], [status.UNAUTHENTICATED, 'ERR_CA_UPSTREAM_REFUSED'], JSON.stringify(refused));
    assert.match(refused.details ?? '', /upstream CA refused the request \(UNAUTHENTICATED\)/);
    assert.equal(lastDenialReason(env.logs), 'ERR_CA_UPSTREAM_REFUSED');

    await writeFile(tokenFile, raToken);
    const again = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    assert.equal(again.code, undefined, `the restored token is used without a restart: ${JSON.stringify(again)}`);
  } finally {
    c.close();
    await writeFile(tokenFile, raToken);
    await ra.stop();
  }
});

test('istio-upstream: the root file is read again during a root rotation (no restart): the upstream is trusted under what it holds now', async () => {
  const other = await makePluginCa('Upstream-Next');
  const raRoots = join(dir.path, 'ra-rotating-root.pem');
  await writeFile(raRoots, plugin.root.pem);
  const ra = await startRa(upstreamSigner({ rootCertFile: raRoots }), true);
  await until(() => ra.signer.ready, 'the RA signer read its files');
  const c = caClient(ra.port, undefined);
  const ask = async () => c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP, ttlSeconds: 3600 });
  try {
    assert.ok((await ask()).chain, 'the upstream root alone: served');
    // The new root alone (the upstream not rotated yet): the file is also the upstream's TLS trust,
    // so the RA no longer reaches it under the old root (the channel is made again from the file).
    await writeFile(raRoots, other.root.pem);
    const refused = await ask();
    assert.deepEqual([refused.code, refused.errorCode], [status.UNAVAILABLE, 'ERR_CA_UPSTREAM_UNAVAILABLE'], JSON.stringify(refused));
    // The overlap: both roots; served again, and the RA's own roots are both.
    await writeFile(raRoots, other.root.pem + plugin.root.pem);
    const served = await ask();
    assert.ok(served.chain, JSON.stringify(served));
    assert.equal(served.chain.at(-1), plugin.root.pem, "the answer's last element is still the upstream's roots");
    assert.equal(ra.signer.roots().join('').match(/BEGIN CERTIFICATE/g)?.length, 2);
  } finally {
    c.close();
    await ra.stop();
  }
});

test("istio-upstream: a caller that gives up (its gRPC deadline) cancels the forwarded call: the upstream's signer hears of it at once, not at the RA's 120 s deadline", async () => {
  // The upstream: a certbroker CA (http2 transport, TLS) whose module signer serves its own
  // certificate and hangs on workload leaves until its signal fires.
  const hangPath = join(dir.path, 'upstream-hang.mjs');
  await writeFile(
    hangPath,
    `import base from ${JSON.stringify(pathToFileURL(join(REPO_ROOT, 'examples/signer-module.mjs')).href)};
export const seen = { aborted: 0 };
export default { ...base, sign: (r) => r.purpose === 'serving' ? base.sign(r) : new Promise((_, reject) => r.signal.addEventListener('abort', () => { seen.aborted++; reject(r.signal.reason); })) };\n`,
  );
  const { seen } = (await import(pathToFileURL(hangPath).href)) as { seen: { aborted: number } };
  const slow = await env.startCa({
    signer: { kind: 'module', module: await loadSignerModule(hangPath), specifier: hangPath, timeoutMs: 120_000 },
    trustedRegistrationAuthorities: [`${CA_NAMESPACE}/${RA_SA}`],
  });
  await waitForIndex(slow, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  const slowRoot = join(dir.path, 'slow-upstream-root.pem');
  await writeFile(slowRoot, slow.rootsPem());
  const ra = await startRa(upstreamSigner({ address: `127.0.0.1:${slow.port}`, rootCertFile: slowRoot, timeoutMs: 120_000 }), true);
  await until(() => ra.signer.ready, 'the RA signer read its files');
  const c = caClient(ra.port, undefined);
  try {
    const r = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP, deadlineMs: 2000 });
    assert.equal(r.code, status.DEADLINE_EXCEEDED, JSON.stringify(r));
    for (let i = 0; i < 500 && seen.aborted === 0; i++) await new Promise((res) => setTimeout(res, 10));
    assert.equal(seen.aborted, 1, "the upstream's module signal fired: the RA reset the forwarded call when its caller gave up");
  } finally {
    c.close();
    await ra.stop();
    await slow.stop();
  }
});

test('istio-upstream: an upstream that is down is UNAVAILABLE, one that hangs after TLS is DEADLINE_EXCEEDED; serving names on an impersonated SVID are refused', async () => {
  const closed = await new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
  const material = await silentTlsMaterial();
  const hung = await startHungServer({ tls: material });
  const hungRoot = join(dir.path, 'hung-root.pem');
  await writeFile(hungRoot, material.caCertPem);
  const down = await startRa(upstreamSigner({ address: `127.0.0.1:${closed}` }), true);
  const hanging = await startRa(upstreamSigner({ address: hung.address, rootCertFile: hungRoot, timeoutMs: 1000 }), true);
  const cd = caClient(down.port, undefined);
  const ch = caClient(hanging.port, undefined);
  try {
    for (const ra of [down, hanging]) await until(() => ra.signer.ready, 'the signer read its files');
    const a = await cd.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    assert.deepEqual([a.code, a.errorCode], [status.UNAVAILABLE, 'ERR_CA_UPSTREAM_UNAVAILABLE'], JSON.stringify(a));
    const b = await ch.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    assert.deepEqual([b.code, b.errorCode], [status.DEADLINE_EXCEEDED, 'ERR_CA_UPSTREAM_TIMEOUT'], JSON.stringify(b));
    assert.ok(hung.accepted >= 1, 'the hung upstream was reached');
    await assert.rejects(down.signer.sign({ csrPem: await newCsr(), spiffeId: SLEEP, ttlSeconds: 3600, servingNames: ['localhost'] }), { code: 'ERR_CA_SERVING_NAMES_UNSUPPORTED' });
  } finally {
    cd.close();
    ch.close();
    await down.stop();
    await hanging.stop();
    await hung.close();
  }
});

