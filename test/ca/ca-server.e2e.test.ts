/**
 * CreateCertificate result codes, the self-signed root in istio-ca-secret (persisted, reused,
 * creation race), TTL rules on the wire, gRPC health and reflection, the ops endpoint, and
 * graceful shutdown — a real CA against a real devcluster. These run on the grpc-js transport
 * (plaintext's, and CA_TRANSPORT=grpc-js); the default TLS transport's equivalents are in
 * h2-transport.e2e.test.ts, and the node-authorization matrix runs on the default.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { credentials, Metadata, status, type Client, type ChannelCredentials, type ServiceError } from '@grpc/grpc-js';
import { X509Certificate } from 'node:crypto';
import { createServer, type AddressInfo } from 'node:net';
import { createRootCa, exportPkcs8Pem } from '../../src/pki/index.js';
import { loadProtos, lookup } from '../../src/grpc/index.js';
import { listServices, reflectionClient } from '../support/grpc-reflection.js';
import { CA_CERT_KEY, CA_KEY_KEY, kubeCaSecretStore, SelfSignedSigner, type CaServer, type Signer } from '../../src/ca/index.js';
import { systemClock } from '../../src/core/clock.js';
import { caClient, CA_NAMESPACE, httpGet, startCaEnv, TD, type CaEnv } from './support/ca-env.js';
import { makePluginCa, newCsr, opensslVerifyChain, tempDir, writeCacerts } from './support/pki-fixtures.js';
import { opensslMissing } from '../support/tools.js';

let env: CaEnv;
let ca: CaServer;
let token: string;

before(async () => {
  env = await startCaEnv();
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  ca = await env.startCa({ opsHost: '127.0.0.1', opsPort: 0, transport: 'grpc-js' });
  token = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
});

after(async () => {
  await env?.close();
});

/** A TCP port free right now on 127.0.0.1 (for an ops endpoint that must be known before its server resolves). */
async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}


test('self-signed root is created once in istio-ca-secret and reused by a restart', async () => {
  const secret = await env.core.readNamespacedSecret({ namespace: CA_NAMESPACE, name: 'istio-ca-secret' });
  const certPem = Buffer.from(secret.data?.[CA_CERT_KEY] ?? '', 'base64').toString();
  assert.ok(secret.data?.[CA_KEY_KEY], 'key stored');
  assert.equal(certPem.trim(), ca.rootsPem().trim());
  const root = new X509Certificate(certPem);
  assert.equal(root.ca, true);
  assert.match(root.subject, /O=cluster\.local/);
  const again = await env.startCa();
  assert.equal(again.rootsPem(), ca.rootsPem(), 'second start (or replica) reuses the stored root');
  await again.stop();
});

test('replicas racing to create the root agree on one (409 loser re-reads)', async () => {
  await env.ensureNamespace('race-ns');
  await env.cluster.apply([
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'certbroker-ca', namespace: 'race-ns' }, rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create'] }] },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'certbroker-ca', namespace: 'race-ns' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'certbroker-ca' }, subjects: [{ kind: 'ServiceAccount', name: 'certbroker-ca', namespace: CA_NAMESPACE }] },
  ]);
  const signer = { kind: 'self-signed' as const, namespace: 'race-ns', secretName: 'istio-ca-secret', keyType: 'ec' as const, rootTtlSeconds: 86_400 * 365 };
  const replicas = await Promise.all([1, 2, 3].map(() => env.startCa({ signer })));
  try {
    const roots = new Set(replicas.map((r) => r.rootsPem()));
    assert.equal(roots.size, 1, 'all replicas serve the same root');
    const stored = await env.core.readNamespacedSecret({ namespace: 'race-ns', name: 'istio-ca-secret' });
    assert.equal(Buffer.from(stored.data?.[CA_CERT_KEY] ?? '', 'base64').toString().trim(), [...roots][0]!.trim());
    const created = env.logs.filter((l) => l.includes('created self-signed root') && l.includes('race-ns')).length;
    assert.equal(created, 1, 'exactly one replica created the root');
  } finally {
    await Promise.all(replicas.map((r) => r.stop()));
  }
});

test('RSA self-signed root works too', { skip: opensslMissing() }, async () => {
  await env.ensureNamespace('rsa-ns');
  await env.cluster.apply([
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'certbroker-ca', namespace: 'rsa-ns' }, rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create'] }] },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'certbroker-ca', namespace: 'rsa-ns' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'certbroker-ca' }, subjects: [{ kind: 'ServiceAccount', name: 'certbroker-ca', namespace: CA_NAMESPACE }] },
  ]);
  const rsa = await env.startCa({ signer: { kind: 'self-signed', namespace: 'rsa-ns', secretName: 'istio-ca-secret', keyType: 'rsa', rootTtlSeconds: 86_400 } });
  const c = caClient(rsa.port, rsa.rootsPem());
  try {
    const r = await c.create({ token, csr: await newCsr(), ttlSeconds: 3600 });
    assert.equal(r.code, undefined, JSON.stringify(r));
    assert.equal(new X509Certificate(rsa.rootsPem()).publicKey.asymmetricKeyType, 'rsa');
    assert.match(await opensslVerifyChain(r.chain!), /OK/);
    assert.equal(new X509Certificate(r.chain![0]!).publicKey.asymmetricKeyType, 'ec', 'the leaf keeps the CSR key type');
  } finally {
    c.close();
    await rsa.stop();
  }
});

test('CreateCertificate codes: bad CSR, CSR signature invalid, TTL over max, TTL honoured', async () => {
  const c = caClient(ca.port, ca.rootsPem());
  try {
    const garbage = await c.create({ token, csr: 'not a csr' });
    assert.equal(garbage.code, status.INVALID_ARGUMENT);
    assert.match(garbage.errorCode ?? '', /^ERR_PKI_(PEM|CSR)_/);

    const good = await newCsr();
    const der = Buffer.from(good.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    der[der.length - 5]! ^= 0x01; // inside the signature
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    const badSig = await c.create({ token, csr: tampered });
    assert.equal(badSig.code, status.INVALID_ARGUMENT);
    assert.equal(badSig.errorCode, 'ERR_PKI_CSR_SIGNATURE_INVALID');

    const tooLong = await c.create({ token, csr: good, ttlSeconds: 7 * 86_400 + 1 });
    assert.equal(tooLong.code, status.INVALID_ARGUMENT);
    assert.equal(tooLong.errorCode, 'ERR_CA_TTL_OVER_MAX');

    const hour = await c.create({ token, csr: good, ttlSeconds: 3600 });
    assert.equal(hour.code, undefined);
    const leaf = new X509Certificate(hour.chain![0]!);
    const lifetime = Date.parse(leaf.validTo) - Date.parse(leaf.validFrom);
    assert.equal(lifetime, 3600_000 + 120_000, 'ttl plus the 2 min backdate');

    const dflt = await c.create({ token, csr: good });
    const d = new X509Certificate(dflt.chain![0]!);
    assert.equal(Date.parse(d.validTo) - Date.parse(d.validFrom), 86_400_000 + 120_000, 'default 24 h');
  } finally {
    c.close();
  }
});

test('signer not ready: UNAVAILABLE until the cacerts appear (plaintext, loopback)', { skip: opensslMissing() }, async () => {
  const dir = await tempDir();
  const pc = await env.startCa({ plaintext: true, opsHost: '127.0.0.1', opsPort: 0, signer: { kind: 'cacerts', dir: dir.path, pollIntervalMs: 50 } });
  const c = caClient(pc.port, undefined);
  try {
    const r = await c.create({ token, csr: await newCsr() });
    assert.equal(r.code, status.UNAVAILABLE);
    assert.equal(r.errorCode, 'ERR_CA_SIGNER_NOT_READY');
    assert.equal(pc.ready, false);
    const notReady = await httpGet(pc.opsPort!, '/readyz');
    assert.equal(notReady.status, 503);
    assert.match(notReady.body, /signer failed: cacerts .*missing/);
    const plugin = await makePluginCa();
    await writeCacerts(dir.path, plugin);
    while (!pc.ready) await new Promise((res) => setTimeout(res, 10));
    const ok = await c.create({ token, csr: await newCsr() });
    assert.equal(ok.code, undefined, JSON.stringify(ok));
    assert.equal(ok.chain?.length, 3);
    assert.equal(ok.chain?.[1], plugin.intermediate.pem);
    assert.match(await opensslVerifyChain(ok.chain!), /OK/);
  } finally {
    c.close();
    await pc.stop();
    await dir.remove();
  }
});

test('serving certificate: from the CA root, with the configured DNS and IP SANs', async () => {
  const { connect } = await import('node:tls');
  const cert = await new Promise<import('node:crypto').X509Certificate>((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: ca.port, ca: ca.rootsPem(), servername: 'localhost', ALPNProtocols: ['h2'] }, () => {
      const c = s.getPeerX509Certificate();
      s.destroy();
      if (c) resolve(c);
      else reject(new Error('no certificate'));
    });
    s.on('error', reject);
  });
  assert.equal(cert.subjectAltName, 'DNS:localhost, IP Address:127.0.0.1');
  assert.ok(cert.checkIssued(new X509Certificate(ca.rootsPem())));
  assert.equal(cert.ca, false);
});

test('ops endpoint: healthz, readyz, metrics', async () => {
  assert.equal((await httpGet(ca.opsPort!, '/healthz')).status, 200);
  const ready = await httpGet(ca.opsPort!, '/readyz');
  assert.equal(ready.status, 200, ready.body);
  const m = await httpGet(ca.opsPort!, '/metrics');
  assert.match(m.body, /certbroker_ca_signing_duration_seconds_bucket/);
  assert.match(m.body, /certbroker_ca_requests_total\{outcome="invalid",reason="ERR_CA_TTL_OVER_MAX"\} 1/);
  assert.match(m.body, /certbroker_ca_signer_ready 1/);
});

test('ops endpoint is up while the signer is not: /readyz names a refused stored root; deleting the Secret lets the CA start', async () => {
  // A stored root whose key is another root's: refused, and the CA keeps re-reading the Secret.
  const a = await createRootCa({ subject: 'O=a', ttlSeconds: 86_400 });
  const b = await createRootCa({ subject: 'O=b', ttlSeconds: 86_400 });
  const secretName = 'mismatched-ca-secret';
  await env.core.createNamespacedSecret({
    namespace: CA_NAMESPACE,
    body: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace: CA_NAMESPACE },
      data: { [CA_CERT_KEY]: Buffer.from(a.cert.toString('pem')).toString('base64'), [CA_KEY_KEY]: Buffer.from((await exportPkcs8Pem(b.privateKey)).reveal()).toString('base64') },
    },
  });
  const opsPort = await freePort();
  const starting = env.startCa({ opsHost: '127.0.0.1', opsPort, signer: { kind: 'self-signed', namespace: CA_NAMESPACE, secretName, keyType: 'ec', rootTtlSeconds: 86_400 } });
  let started: CaServer | undefined;
  void starting.then((s) => (started = s), () => undefined);
  try {
    let ready: { status: number; body: string } | undefined;
    for (let i = 0; i < 500 && !(ready?.body.includes(secretName)); i++) {
      ready = await httpGet(opsPort, '/readyz').catch(() => undefined);
      if (!ready?.body.includes(secretName)) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(ready?.status, 503, ready?.body);
    assert.match(ready!.body, /mismatched-ca-secret/);
    assert.equal((await httpGet(opsPort, '/healthz')).status, 200, 'alive: a refused root is not a reason to restart');
    assert.equal(started, undefined, 'not serving gRPC without a signer');

    await env.core.deleteNamespacedSecret({ namespace: CA_NAMESPACE, name: secretName });
    const s = await starting;
    let now = await httpGet(opsPort, '/readyz');
    for (let i = 0; i < 500 && now.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 20));
      now = await httpGet(opsPort, '/readyz');
    }
    assert.equal(now.status, 200, now.body);
    assert.notEqual(s.rootsPem().trim(), a.cert.toString('pem').trim(), 'a fresh root, not the refused one');
  } finally {
    await env.core.deleteNamespacedSecret({ namespace: CA_NAMESPACE, name: secretName }).catch(() => undefined);
    await (started ?? (await starting.catch(() => undefined)))?.stop();
  }
});

type Unary = (req: unknown, cb: (err: ServiceError | null, res?: Record<string, unknown>) => void) => void;

test('gRPC health reports SERVING; reflection lists the CA service', async () => {
  const { grpcObject } = loadProtos(['grpc/health/v1/health.proto']);
  const Health = lookup<new (a: string, c: ChannelCredentials, o: Record<string, string>) => Client & { Check: Unary }>(grpcObject, 'grpc.health.v1.Health');
  const h = new Health(`127.0.0.1:${ca.port}`, credentials.createSsl(Buffer.from(ca.rootsPem())), { 'grpc.ssl_target_name_override': 'localhost' });
  const check = (service: string) => new Promise<Record<string, unknown> | ServiceError>((resolve) => h.Check({ service }, (err, res) => resolve(err ?? res!)));
  assert.deepEqual(await check(''), { status: 'SERVING' });
  assert.deepEqual(await check('istio.v1.auth.IstioCertificateService'), { status: 'SERVING' });
  assert.equal(((await check('nope')) as ServiceError).code, status.NOT_FOUND);
  h.close();

  const r = reflectionClient(`127.0.0.1:${ca.port}`, credentials.createSsl(Buffer.from(ca.rootsPem())), { 'grpc.ssl_target_name_override': 'localhost' });
  const services = await listServices(r);
  r.close();
  assert.ok(services.includes('istio.v1.auth.IstioCertificateService'), services.join(','));
  assert.ok(services.includes('grpc.health.v1.Health'));
});

test('graceful shutdown: in-flight calls finish, new calls fail', async () => {
  const s = await env.startCa({ transport: 'grpc-js' });
  const c = caClient(s.port, s.rootsPem());
  const csr = await newCsr();
  try {
    assert.equal((await c.create({ token, csr })).code, undefined, 'warm-up call connects');
    const fresh = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
    env.cluster.faults.setLatency(300); // the TokenReview of the fresh token is slow
    const misses = async () => (await s.metrics.tokenReviewCache.get()).values.find((v) => v.labels.result === 'miss')?.value ?? 0;
    const before = await misses();
    const inflight = c.create({ token: fresh, csr });
    while ((await misses()) === before) await new Promise((r) => setTimeout(r, 2));
    const stopping = s.stop();
    const r = await inflight;
    await stopping;
    assert.equal(r.code, undefined, `in-flight call completed: ${JSON.stringify(r).slice(0, 200)}`);
    const late = await c.create({ token, csr });
    assert.equal(late.code, status.UNAVAILABLE);
    assert.ok(env.logs.some((l) => l.includes('"msg":"CA stopped"') && l.includes('"shutdown":"graceful"')));
  } finally {
    env.cluster.faults.clear();
    c.close();
  }
});

test('pod informer survives dropped watches and compacted history', async () => {
  const { waitForIndex } = await import('./support/ca-env.js');
  assert.ok(env.cluster.faults.dropWatches() >= 1, 'the CA had a pod watch open');
  await env.createPod({ namespace: 'default', name: 'after-drop', serviceAccount: 'sleep', node: 'node-b' });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'after-drop' }) !== undefined);
  env.cluster.faults.compact();
  env.cluster.faults.dropWatches();
  await env.deletePod('default', 'after-drop');
  await env.createPod({ namespace: 'default', name: 'after-compact', serviceAccount: 'sleep', node: 'node-b' });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'after-compact' }) !== undefined && i.getPod({ namespace: 'default', name: 'after-drop' }) === undefined);
  assert.equal(ca.ready, true);
});

test('pod informer: apiserver errors during re-list keep the old index, then it catches up', async () => {
  const { waitForIndex } = await import('./support/ca-env.js');
  const faults = env.cluster.faults;
  const before = faults.injectedFailures;
  faults.failWith500(1, { match: { path: '/pods', method: 'GET' } });
  faults.dropWatches();
  while (faults.injectedFailures < before + 1) {
    // While the informer cannot list, what it knew stays (no wipe, still synced).
    assert.ok(ca.podIndex('Kubernetes')!.getPod({ namespace: 'default', name: 'sleep-a' }), 'index kept during the outage');
    await new Promise((r) => setTimeout(r, 20));
  }
  await env.createPod({ namespace: 'default', name: 'after-errors', serviceAccount: 'sleep', node: 'node-b' });
  await env.deletePod('default', 'after-compact');
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'after-errors' }) !== undefined && i.getPod({ namespace: 'default', name: 'after-compact' }) === undefined);
  assert.ok(env.logs.some((l) => /"msg":"(list|watch) failed, retrying"/.test(l) && l.includes('HTTP 500')), 'the failure and its retry are logged');
});

/** The base64 body of a PEM block, whole and line by line (a PEM logged as JSON has its newlines escaped). */
function pemBodyForms(pem: string): string[] {
  const lines = pem.split('\n').filter((l) => l !== '' && !l.startsWith('-----'));
  assert.ok(lines.length > 0, 'a PEM with a body');
  return [lines.join(''), ...lines.filter((l) => l.length >= 16)];
}

test('no private key or token in the CA log: not the CA key, not a serving key, not any token used', async () => {
  // A CA whose signer (the real self-signed one, same Secret) tells the test each serving key it
  // hands out; it serves a good call and a denied one, so both paths write their logs.
  const real = new SelfSignedSigner({
    store: kubeCaSecretStore({ kubeConfig: env.caKubeConfig, namespace: CA_NAMESPACE, name: 'istio-ca-secret' }),
    trustDomain: TD,
    keyType: 'ec',
    rootTtlSeconds: 10 * 365 * 86_400,
    clock: systemClock,
    logger: env.logger,
    maxTtlSeconds: 7 * 86_400,
  });
  await real.load();
  const servingKeys: string[] = [];
  const recording: Signer = {
    get description() {
      return real.description;
    },
    get ready() {
      return real.ready;
    },
    get notReadyReason() {
      return real.notReadyReason;
    },
    roots: () => real.roots(),
    sign: (r) => real.sign(r),
    async issueServingCertificate(r) {
      const cert = await real.issueServingCertificate(r);
      servingKeys.push(cert.privateKeyPem.reveal());
      return cert;
    },
    onChange: (l) => real.onChange(l),
    close: () => real.close(),
  };
  const s = await env.startCa({ signer: { kind: 'custom', signer: recording } });
  const c = caClient(s.port, s.rootsPem());
  const wrongAudience = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a', audiences: ['not-istio-ca'] });
  try {
    assert.equal((await c.create({ token, csr: await newCsr() })).code, undefined);
    assert.equal((await c.create({ token: wrongAudience, csr: await newCsr() })).code, status.UNAUTHENTICATED);
  } finally {
    c.close();
    await s.stop();
  }
  assert.ok(servingKeys.length >= 1, 'the serving key was recorded');

  const secret = await env.core.readNamespacedSecret({ namespace: CA_NAMESPACE, name: 'istio-ca-secret' });
  const caKeyPem = Buffer.from(secret.data?.[CA_KEY_KEY] ?? '', 'base64').toString();
  assert.match(caKeyPem, /PRIVATE KEY/);
  const caOwnToken = env.caKubeConfig.getCurrentUser()?.token;
  assert.ok(caOwnToken, 'the CA authenticates to the apiserver with a token');
  const forbidden = [
    ...pemBodyForms(caKeyPem),
    ...servingKeys.flatMap(pemBodyForms),
    ...[token, wrongAudience, caOwnToken].map((t) => t.split('.')[2]!),
  ];
  assert.ok(env.logs.length > 0);
  for (const line of env.logs) {
    const msg = (JSON.parse(line) as { msg?: string }).msg; // the message only: the line may hold the secret
    assert.ok(!line.includes('PRIVATE KEY'), `a PEM private key in the log line "${msg}"`);
    for (const f of forbidden) assert.ok(!line.includes(f), `a secret (${f.length} chars) in the log line "${msg}"`);
  }
});

void Metadata;
