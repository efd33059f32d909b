/**
 * `certbroker ca` as a process: configured by flags and env, serving TLS with a serving
 * certificate from its own signer, ops endpoint up, clean exit on SIGTERM. The subcommand module
 * is driven directly (src/cli/ca.ts), so this does not depend on the other subcommands existing.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeFile } from 'node:fs/promises';
import { caClient, CA_NAMESPACE, CA_SA, startCaEnv, type CaEnv } from './support/ca-env.js';
import { newCsr, opensslVerifyChain, tempDir } from './support/pki-fixtures.js';
import { watchLog, writeCaLauncher } from './support/ca-process.js';
import { opensslMissing } from '../support/tools.js';

let env: CaEnv;
let dir: { path: string; remove: () => Promise<void> };

before(async () => {
  env = await startCaEnv();
  dir = await tempDir('ca-cli-');
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
});

after(async () => {
  await env?.close();
  await dir?.remove();
});

test('certbroker ca: starts from flags/env, issues over TLS, serves ops, exits 0 on SIGTERM', { skip: opensslMissing() }, async () => {
  const kubeconfig = join(dir.path, 'kubeconfig');
  const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer] });
  await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
  const launcher = await writeCaLauncher(dir.path);
  const child = spawn(process.execPath, [launcher, '--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', '127.0.0.1:0'], {
    env: { ...process.env, CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1', CA_SIGNING_WORKERS: '2', LOG_LEVEL: 'info', CA_SHUTDOWN_GRACE_SECONDS: '2' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const log = watchLog(child);
  const lines = log.lines;
  try {
    const ops = log.waitFor((r) => r.msg === 'ops endpoint listening');
    const listening = await log.waitFor((r) => r.msg === 'CA listening');
    const opsRec = await ops;
    assert.equal(listening.tls, true);
    const port = Number(listening.port);
    const secret = await env.core.readNamespacedSecret({ namespace: CA_NAMESPACE, name: 'istio-ca-secret' });
    const rootsPem = Buffer.from(secret.data?.['ca-cert.pem'] ?? '', 'base64').toString();
    const c = caClient(port, rootsPem);
    const token = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
    const r = await c.create({ token, csr: await newCsr() });
    c.close();
    assert.equal(r.code, undefined, JSON.stringify(r));
    assert.match(await opensslVerifyChain(r.chain!), /OK/);
    const ready = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port: Number(opsRec.port), path: '/readyz' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    assert.equal(ready, 200);
  } finally {
    child.kill('SIGTERM');
  }
  const code = await new Promise<number | null>((resolve) => (child.exitCode !== null ? resolve(child.exitCode) : child.once('exit', (c) => resolve(c))));
  assert.equal(code, 0, lines.join('\n'));
  assert.ok(!lines.join('\n').includes(caToken.split('.')[2]!), 'CA token not logged');
});

test('certbroker ca: bad configuration lists every problem and exits non-zero', async () => {
  const cliModule = fileURLToPath(new URL('../../src/cli/ca.js', import.meta.url));
  const script = `import(${JSON.stringify(cliModule)}).then((m) => m.command().parseAsync(process.argv.slice(1), { from: 'user' })).catch((e) => { process.stderr.write(String(e.message)); process.exitCode = 2; })`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, '--', '--grpc-address', 'nonsense', '--signer', 'hsm'], {
    env: { ...process.env, MAX_WORKLOAD_CERT_TTL_SECONDS: 'ten' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  assert.equal(code, 2);
  assert.match(err, /CA_GRPC_ADDRESS="nonsense" is not host:port/);
  assert.match(err, /CA_SIGNER="hsm" is not one of self-signed\|cacerts/);
  assert.match(err, /MAX_WORKLOAD_CERT_TTL_SECONDS="ten" is not an integer/);
});

test('certbroker ca: a start that fails after the signer and ops are up (gRPC port taken) exits non-zero on its own', async () => {
  const kubeconfig = join(dir.path, 'kubeconfig-busy');
  const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer] });
  await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  const busyPort = (busy.address() as AddressInfo).port;
  // The real entry point: it reports the error and sets the exit code, then the process must end
  // by itself, so nothing the failed start opened may keep it alive.
  const main = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
  const child = spawn(process.execPath, [main, 'ca', '--kubeconfig', kubeconfig, '--grpc-address', `127.0.0.1:${busyPort}`, '--ops-address', '127.0.0.1:0'], {
    env: { ...process.env, CA_SERVING_DNS_NAMES: 'localhost', CA_SIGNING_WORKERS: '1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  // Bounded: a process that hangs is killed and the test fails with what it printed.
  const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  try {
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (c, sig) => resolve([c, sig])));
    assert.equal(signal, null, `still running 30 s after a failed start:\n${err}`);
    assert.notEqual(code, 0, err);
    assert.match(err, /ops endpoint listening/, 'the ops endpoint was up before the failure');
    assert.match(err, /^certbroker: .*EADDRINUSE/m, 'reported by the CLI, not an uncaught exception');
  } finally {
    clearTimeout(killer);
    busy.close();
  }
});
