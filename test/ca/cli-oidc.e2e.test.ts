/**
 * `certbroker ca` as a process with OIDC/JWT verification (TokenReview off): its own
 * Kubernetes token (from its kubeconfig) goes on discovery/JWKS fetches when they are at the
 * API server (the devcluster, which serves discovery to authenticated callers only), and never
 * to an issuer served elsewhere (a second HTTPS server on loopback that records headers).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { makeServingMaterial } from '../../src/devcluster/serving-cert.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { caClient, CA_NAMESPACE, CA_SA, startCaEnv, TD, type CaEnv } from './support/ca-env.js';
import { newCsr, tempDir } from './support/pki-fixtures.js';
import { watchLog, writeCaLauncher } from './support/ca-process.js';

const FOREIGN_ISSUER = 'https://oidc.example/cluster';
let env: CaEnv;
let dir: { path: string; remove: () => Promise<void> };
let kubeconfig: string;
let caToken: string;
let launcher: string;
let foreign: { url: string; caFile: string; seen: Array<string | undefined>; server: Server; key: CryptoKey };

before(async () => {
  env = await startCaEnv();
  dir = await tempDir('ca-cli-oidc-');
  kubeconfig = join(dir.path, 'kubeconfig');
  caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer] });
  await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
  launcher = await writeCaLauncher(dir.path);

  const material = await makeServingMaterial({ hosts: ['127.0.0.1'], nowMs: Date.now() });
  const caFile = join(dir.path, 'oidc-ca.pem');
  await writeFile(caFile, material.caCertPem);
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'foreign-1', alg: 'ES256', use: 'sig' };
  const seen: Array<string | undefined> = [];
  let url = '';
  const server = createServer({ cert: material.certPem, key: material.keyPem }, (req, res) => {
    seen.push(req.headers.authorization);
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify(req.url?.startsWith('/.well-known/') ? { issuer: FOREIGN_ISSUER, jwks_uri: `${url}/keys` } : { keys: [jwk] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  foreign = { url, caFile, seen, server, key: privateKey };
});

after(async () => {
  foreign?.server.close();
  await env?.close();
  await dir?.remove();
});

/** A default/sleep service-account JWT signed by the foreign issuer's key (valid 10 minutes). */
function foreignSleepToken(): Promise<string> {
  return new SignJWT({ 'kubernetes.io': { namespace: 'default', serviceaccount: { name: 'sleep' } } })
    .setProtectedHeader({ alg: 'ES256', kid: 'foreign-1' })
    .setSubject('system:serviceaccount:default:sleep')
    .setIssuer(FOREIGN_ISSUER)
    .setAudience('istio-ca')
    .setExpirationTime('10m')
    .sign(foreign.key);
}

async function withCa(extraEnv: Record<string, string>, body: (port: number, rootsPem: string) => Promise<void>): Promise<string[]> {
  const child = spawn(process.execPath, [launcher, '--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', 'off'], {
    env: { ...process.env, CA_SERVING_DNS_NAMES: 'localhost,127.0.0.1', CA_SIGNING_WORKERS: '0', LOG_LEVEL: 'info', CA_SHUTDOWN_GRACE_SECONDS: '1', CA_TOKEN_REVIEW: 'false', ...extraEnv },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const log = watchLog(child);
  try {
    const port = Number((await log.waitFor((r) => r.msg === 'CA listening')).port);
    const secret = await env.core.readNamespacedSecret({ namespace: CA_NAMESPACE, name: 'istio-ca-secret' });
    await body(port, Buffer.from(secret.data?.['ca-cert.pem'] ?? '', 'base64').toString());
  } finally {
    child.kill('SIGTERM');
    await new Promise<void>((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', () => resolve())));
  }
  return log.lines;
}

test('issuer served off the API server: discovery and JWKS fetched without the CA token', async () => {
  foreign.seen.length = 0;
  const jwt = await foreignSleepToken();
  const lines = await withCa({ CA_OIDC_ISSUER: FOREIGN_ISSUER, CA_OIDC_DISCOVERY_URL: foreign.url, CA_OIDC_CA_FILE: foreign.caFile, CA_JWT_ALGORITHMS: 'ES256' }, async (port, rootsPem) => {
    const c = caClient(port, rootsPem);
    try {
      const r = await c.create({ token: jwt, csr: await newCsr() });
      assert.equal(r.code, undefined, JSON.stringify(r).slice(0, 300));
      assert.equal(checkX509Svid(r.chain![0]!)?.id, `spiffe://${TD}/ns/default/sa/sleep`);
    } finally {
      c.close();
    }
  });
  assert.ok(foreign.seen.length >= 2, `discovery and JWKS were fetched (${foreign.seen.length} requests)`);
  assert.deepEqual(foreign.seen, foreign.seen.map(() => undefined), 'no authorization header reached the foreign issuer');
  assert.ok(lines.some((l) => l.includes("without the CA's Kubernetes credentials")), 'the CA says so at start');
  assert.ok(!lines.join('\n').includes(caToken.split('.')[2]!), 'CA token not logged');
});

test('discovery at the API server: the CA authenticates its fetches and verifies cluster tokens', async () => {
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  const token = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
  await writeFile(join(dir.path, 'cluster-ca.pem'), env.cluster.caCertPem);
  await withCa({ CA_OIDC_ISSUER: env.cluster.issuer, CA_OIDC_DISCOVERY_URL: env.cluster.url, CA_OIDC_CA_FILE: join(dir.path, 'cluster-ca.pem'), CA_JWT_ALGORITHMS: 'ES256' }, async (port, rootsPem) => {
    const c = caClient(port, rootsPem);
    try {
      const r = await c.create({ token, csr: await newCsr() });
      assert.equal(r.code, undefined, JSON.stringify(r).slice(0, 300));
      assert.equal(checkX509Svid(r.chain![0]!)?.id, `spiffe://${TD}/ns/default/sa/sleep`);
    } finally {
      c.close();
    }
  });
});

test('startCaServer with useKubeCredentials and a foreign issuer: the CA token stays at the API server origin', async () => {
  foreign.seen.length = 0;
  const jwt = await foreignSleepToken();
  const { readFile } = await import('node:fs/promises');
  const caPem = await readFile(foreign.caFile, 'utf8');
  const ca = await env.startCa({
    clusters: [
      env.clusterConfig('Kubernetes', {
        tokenReview: false,
        oidc: { issuer: FOREIGN_ISSUER, discoveryUrl: foreign.url, caPem, algorithms: ['ES256'], useKubeCredentials: true },
      }),
    ],
  });
  const c = caClient(ca.port, ca.rootsPem());
  try {
    const r = await c.create({ token: jwt, csr: await newCsr() });
    assert.equal(r.code, undefined, JSON.stringify(r).slice(0, 300));
  } finally {
    c.close();
    await ca.stop();
  }
  assert.ok(foreign.seen.length >= 2, `discovery and JWKS were fetched (${foreign.seen.length} requests)`);
  assert.deepEqual(foreign.seen, foreign.seen.map(() => undefined), 'no authorization header reached the foreign issuer');
});
