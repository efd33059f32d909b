/**
 * `--signer module:<path-or-package>` with real modules: the example of docs/ca.md
 * (examples/signer-module.mjs, which the doc must show verbatim) behind a CA in process (TLS
 * serving certificate from the module too) and as a `certbroker ca` process; and modules that
 * misbehave, written here to files and loaded the same way: one that hangs (cut off at the
 * deadline, its AbortSignal fired: DEADLINE_EXCEEDED), one that throws (UNAVAILABLE, its message
 * not sent), one that certifies another identity or another key (INTERNAL, never returned), and
 * ones that do not load (ERR_CA_MODULE_LOAD; the CLI exits with it).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { status } from '@grpc/grpc-js';
import { createSigner, loadSignerModule, type CaServer, type SignerConfig } from '../../src/ca/index.js';
import { silentLogger } from '../../src/core/log.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { FakeClock } from '../support/fake-clock.js';
import { REPO_ROOT } from '../support/fixtures.js';
import { opensslMissing } from '../support/tools.js';
import { caClient, CA_NAMESPACE, CA_SA, startCaEnv, TD, waitForIndex, type CaEnv } from './support/ca-env.js';
import { startCaProcess, writeCaLauncher } from './support/ca-process.js';
import { makePluginCa, newCsr, opensslVerifyChain, tempDir } from './support/pki-fixtures.js';

const EXAMPLE = join(REPO_ROOT, 'examples/signer-module.mjs');
const EXAMPLE_URL = pathToFileURL(EXAMPLE).href;
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;

let env: CaEnv;
let dir: { path: string; remove: () => Promise<void> };
let ztunnel: string;

/** Writes a module file built on the example (same module instance, so it shares the example's root). */
async function moduleFile(name: string, body: string): Promise<string> {
  const path = join(dir.path, name);
  await writeFile(path, `import base from ${JSON.stringify(EXAMPLE_URL)};\n${body}\n`);
  return path;
}

async function moduleSigner(path: string, timeoutMs = 5000): Promise<SignerConfig> {
  return { kind: 'module', module: await loadSignerModule(path), specifier: path, timeoutMs };
}

async function startCa(signer: SignerConfig): Promise<CaServer> {
  const ca = await env.startCa({ signer });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined && i.getPod({ namespace: 'kube-system', name: 'dns-a' }) !== undefined);
  return ca;
}

before(async () => {
  env = await startCaEnv();
  dir = await tempDir('ca-module-');
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  await env.createPod({ namespace: 'kube-system', name: 'dns-a', serviceAccount: 'coredns', node: 'node-a' });
  ztunnel = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
});

after(async () => {
  await env?.close();
  await dir?.remove();
});

test('docs/ca.md shows examples/signer-module.mjs verbatim', () => {
  const doc = readFileSync(join(REPO_ROOT, 'docs/ca.md'), 'utf8');
  const m = /<!-- examples\/signer-module\.mjs[^>]*-->\n```js\n([\s\S]*?)\n```\n/u.exec(doc);
  assert.ok(m?.[1], 'docs/ca.md has a ```js block after <!-- examples/signer-module.mjs -->');
  assert.equal(`${m[1]}\n`, readFileSync(EXAMPLE, 'utf8'));
});

test('the example module behind the CA: X509-SVIDs under its root over TLS served with its certificate; its refusal is PERMISSION_DENIED with its message', { skip: opensslMissing() }, async () => {
  const ca = await startCa(await moduleSigner(EXAMPLE));
  const c = caClient(ca.port, ca.rootsPem());
  try {
    assert.equal(ca.signer.description, 'example signer module (in-memory P-256 root)');
    const r = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP, ttlSeconds: 3600 });
    assert.equal(r.code, undefined, JSON.stringify(r));
    assert.equal(r.chain!.length, 2);
    assert.equal(checkX509Svid(r.chain![0]!)?.id, SLEEP);
    assert.equal(r.chain![1], ca.rootsPem(), 'the module root last');
    assert.match(await opensslVerifyChain(r.chain!), /OK/);
    const refused = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: `spiffe://${TD}/ns/kube-system/sa/coredns` });
    assert.deepEqual([refused.code, refused.errorCode, refused.details], [status.PERMISSION_DENIED, 'ERR_CA_MODULE_REFUSED', 'this signer does not issue kube-system identities']);
  } finally {
    c.close();
    await ca.stop();
  }
});

test('certbroker ca --signer module:./examples/signer-module.mjs as a process (path from the working directory); a module that cannot load stops the start with ERR_CA_MODULE_LOAD', async () => {
  const kubeconfig = join(dir.path, 'kubeconfig');
  await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer] }) }), { mode: 0o600 });
  const args = ['--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', 'off', '--plaintext'];
  const ca = await startCaProcess(dir.path, [...args, '--signer', 'module:./examples/signer-module.mjs'], {}, { cwd: REPO_ROOT });
  try {
    assert.equal((await ca.log.waitFor((r) => r.msg === 'example signer module ready')).signerModule, './examples/signer-module.mjs');
    const c = caClient(ca.port, undefined);
    let r = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    // Plaintext: the CA answers before its pod index has listed (UNAUTHENTICATED) and the module started (UNAVAILABLE).
    for (let i = 0; i < 200 && r.code !== undefined; i++) {
      await new Promise((res) => setTimeout(res, 20));
      r = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    }
    c.close();
    assert.equal(r.code, undefined, JSON.stringify(r));
    assert.equal(checkX509Svid(r.chain![0]!)?.id, SLEEP);
  } finally {
    assert.equal(await ca.stop(), 0);
  }
  const noSign = await moduleFile('no-sign.mjs', 'export default { roots: () => base.roots() };');
  for (const [spec, want] of [
    ['module:./does/not/exist.mjs', /signer module "\.\/does\/not\/exist\.mjs": cannot be imported/],
    [`module:${noSign}`, /default export is not a SignerModule: sign is not a function/],
  ] as const) {
    const launcher = await writeCaLauncher(dir.path);
    const child = spawn(process.execPath, [launcher, ...args, '--signer', spec], { cwd: REPO_ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.notEqual(code, 0, stderr);
    assert.match(stderr, want);
  }
});

test("a module's root rotation (changed()): the CA's roots and its answers' last element follow at once, with no restart", async () => {
  const rotating = await moduleFile(
    'rotating.mjs',
    `export const control = { extra: [], changed: undefined };
export default {
  ...base,
  async start(ctx) { control.changed = () => ctx.changed(); await base.start(ctx); },
  roots: () => [...base.roots(), ...control.extra],
  async sign(r) { const res = await base.sign(r); return { ...res, roots: [...res.roots, ...control.extra] }; },
};`,
  );
  const ca = await env.startCa({ signer: await moduleSigner(rotating), plaintext: true, transport: 'grpc-js' });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  for (let i = 0; i < 500 && !ca.signer.ready; i++) await new Promise((r) => setTimeout(r, 10));
  const c = caClient(ca.port, undefined);
  try {
    const rootsIn = (chain: readonly string[] | undefined): number => (chain?.at(-1)?.match(/-----BEGIN CERTIFICATE-----/g) ?? []).length;
    const before = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    assert.equal(rootsIn(before.chain), 1, JSON.stringify(before).slice(0, 200));
    assert.equal(ca.signer.roots().length, 1);
    let notified = 0;
    const unsubscribe = ca.signer.onChange(() => notified++);
    const { control } = (await import(pathToFileURL(rotating).href)) as { control: { extra: string[]; changed: () => void } };
    const next = await makePluginCa('Next');
    control.extra.push(next.root.pem);
    control.changed();
    unsubscribe();
    assert.equal(notified, 1, "the CA's change listeners heard the module's changed()");
    assert.deepEqual(ca.signer.roots().length, 2, 'both roots trusted during the overlap');
    assert.ok(ca.signer.roots().some((r) => r.includes(next.root.pem.split('\n')[1]!)), 'the new root is among them');
    const during = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
    assert.equal(rootsIn(during.chain), 2, 'the answer carries both roots in its last element');
    assert.equal(checkX509Svid(during.chain![0]!)?.id, SLEEP);
  } finally {
    c.close();
    await ca.stop();
  }
});

test('module errors: a hang is cut off at the deadline with its signal fired (DEADLINE_EXCEEDED), a throw is UNAVAILABLE without its message, another identity or key is INTERNAL and never returned', async () => {
  const hang = await moduleFile(
    'hang.mjs',
    `export const seen = { aborted: 0 };
export default { ...base, sign: (r) => new Promise((_, reject) => r.signal.addEventListener('abort', () => { seen.aborted++; reject(r.signal.reason); })) };`,
  );
  const fail = await moduleFile('fail.mjs', `export default { ...base, async sign() { throw new Error('backend password is hunter2'); } };`);
  const otherId = await moduleFile('other-id.mjs', `export default { ...base, sign: (r) => base.sign({ ...r, spiffeId: 'spiffe://${TD}/ns/default/sa/admin' }) };`);
  const otherKey = await moduleFile(
    'other-key.mjs',
    `import { webcrypto } from 'node:crypto';
const k = await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, true, ['sign', 'verify']);
const spki = new Uint8Array(await webcrypto.subtle.exportKey('spki', k.publicKey));
export default { ...base, sign: (r) => base.sign({ ...r, spkiDer: spki }) };`,
  );
  const cases = [
    // outcome: the label certbroker_ca_requests_total counts it under, the Istio CA front's for the
    // same status (src/ops/call-outcome.ts): a signer that did not answer in time is unavailable.
    { path: hang, timeoutMs: 300, want: [status.DEADLINE_EXCEEDED, 'ERR_CA_MODULE_TIMEOUT'], outcome: 'unavailable' },
    { path: fail, timeoutMs: 5000, want: [status.UNAVAILABLE, 'ERR_CA_MODULE_FAILED'], outcome: 'unavailable' },
    { path: otherId, timeoutMs: 5000, want: [status.INTERNAL, 'ERR_CA_MODULE_BAD_RESULT'], outcome: 'error' },
    { path: otherKey, timeoutMs: 5000, want: [status.INTERNAL, 'ERR_CA_MODULE_BAD_RESULT'], outcome: 'error' },
  ];
  // One CA that signs with the example serves TLS; each case is a plaintext CA (no serving certificate needed).
  for (const { path, timeoutMs, want, outcome } of cases) {
    const ca = await env.startCa({ signer: await moduleSigner(path, timeoutMs), plaintext: true, transport: 'grpc-js' });
    await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
    for (let i = 0; i < 500 && !ca.signer.ready; i++) await new Promise((r) => setTimeout(r, 10));
    const c = caClient(ca.port, undefined);
    try {
      const r = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP });
      assert.deepEqual([r.code, r.errorCode], want, `${path}: ${JSON.stringify(r)}`);
      assert.equal(r.chain, undefined);
      assert.doesNotMatch(r.details ?? '', /hunter2/);
      const counted = (await ca.metrics.requests.get()).values.filter((v) => v.labels['reason'] === want[1]);
      assert.deepEqual(counted.map((v) => [v.labels['outcome'], v.value]), [[outcome, 1]], `${path}: counted as ${outcome}`);
    } finally {
      c.close();
      await ca.stop();
    }
  }
  const { seen } = (await import(pathToFileURL(hang).href)) as { seen: { aborted: number } };
  assert.equal(seen.aborted, 1, "the hung module's AbortSignal fired");
});

test("a caller that gives up (its gRPC deadline) fires the module's signal at once, not at the module deadline, on both transports", async () => {
  const hang = await moduleFile(
    'hang-workload.mjs',
    `export const seen = { aborted: 0 };
export default { ...base, sign: (r) => r.purpose === 'serving' ? base.sign(r) : new Promise((_, reject) => r.signal.addEventListener('abort', () => { seen.aborted++; reject(r.signal.reason); })) };`,
  );
  const { seen } = (await import(pathToFileURL(hang).href)) as { seen: { aborted: number } };
  for (const transport of ['grpc-js', 'http2'] as const) {
    const plaintext = transport === 'grpc-js';
    const ca = await env.startCa({ signer: await moduleSigner(hang, 120_000), plaintext, transport });
    await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
    for (let i = 0; i < 500 && !ca.signer.ready; i++) await new Promise((r) => setTimeout(r, 10));
    const c = caClient(ca.port, plaintext ? undefined : ca.rootsPem());
    try {
      const before = seen.aborted;
      const r = await c.create({ token: ztunnel, csr: await newCsr(), impersonate: SLEEP, deadlineMs: 1500 });
      assert.equal(r.code, status.DEADLINE_EXCEEDED, `${transport}: ${JSON.stringify(r)}`);
      for (let i = 0; i < 500 && seen.aborted === before; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(seen.aborted, before + 1, `${transport}: the module's signal fired when the caller gave up (its own deadline is 120 s)`);
    } finally {
      c.close();
      await ca.stop();
    }
  }
});

test('module deadline on an injected clock: nothing is answered before it, the signal fires at it', async () => {
  const hang = await moduleFile('hang-clock.mjs', `export const seen = { aborted: 0 };
export default { ...base, sign: (r) => new Promise(() => r.signal.addEventListener('abort', () => seen.aborted++)) };`);
  const clock = new FakeClock(Date.now());
  const { signer, start } = createSigner(await moduleSigner(hang, 10_000), { clock, logger: silentLogger, trustDomain: TD, maxTtlSeconds: 86_400, signingWorkers: 0, defaultCluster: undefined });
  await start();
  const { seen } = (await import(pathToFileURL(hang).href)) as { seen: { aborted: number } };
  let settled = false;
  const call = signer.sign({ csrPem: await newCsr(), spiffeId: SLEEP, ttlSeconds: 3600 }).finally(() => (settled = true));
  await clock.waitForTimers(1);
  await clock.advance(9_999);
  assert.equal(settled, false, 'still waiting just before the deadline');
  assert.equal(seen.aborted, 0);
  await clock.advance(1);
  await assert.rejects(call, { code: 'ERR_CA_MODULE_TIMEOUT', status: 'deadline-exceeded' });
  assert.equal(seen.aborted, 1);
  await signer.close();
});

test('loadSignerModule: a missing file, a module that throws on import, and a default export without roots are ERR_CA_MODULE_LOAD', async () => {
  const throws = join(dir.path, 'throws.mjs');
  await writeFile(throws, "throw new Error('cannot reach the HSM');\n");
  const noRoots = join(dir.path, 'no-roots.mjs');
  await writeFile(noRoots, 'export default { sign: async () => ({}) };\n');
  for (const spec of [join(dir.path, 'missing.mjs'), throws, noRoots, 'certbroker-no-such-signer-package', '']) {
    await assert.rejects(loadSignerModule(spec), { code: 'ERR_CA_MODULE_LOAD' }, spec);
  }
});
