/**
 * The Kubernetes CSR API as the CA's signer, end to end against the devcluster with the RBAC of
 * deploy/ + components/kubernetes-csr enforced: the CA (its own service account) creates,
 * approves, waits for and deletes CSRs; `certbroker k8s-signer` (its own service account) signs
 * them with a plug-in CA. Failure paths: a CSR for another identity, a signer name the CA may not
 * approve, an account without `approve`, a signer without `sign` (the CA times out), a denied
 * CSR (kubectl certificate deny), SANs the signer refuses (Failed condition). Python grpcio gets
 * a certificate through the CA on this backend.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CertificatesV1Api, KubeConfig } from '@kubernetes/client-node';
import type { CaServer } from '../../src/ca/index.js';
import { readK8sSignerConfig, startK8sSigner, type K8sSigner } from '../../src/k8s-signer/index.js';
import { createCsr, generateKeyPair } from '../../src/pki/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { SERVING_NAMES_KEY } from '../../src/protocol/istio-ca.js';
import { caClient, httpGet, startCaEnv, TD, waitForIndex, type CaEnv } from '../ca/support/ca-env.js';
import { cacertsFiles, makePluginCa, opensslVerifyChain, tempDir, writeCacerts, type PluginCa } from '../ca/support/pki-fixtures.js';
import { identityObjectsOf, renderDeployWith } from '../deploy/manifests.js';
import { kubectl } from '../support/cluster.js';
import { kubectlMissing, opensslMissing, pythonGrpcMissing } from '../support/tools.js';
import { interopCall, writeCaStubs } from '../ca/support/python-interop.js';

const SIGNER = 'certbroker.io/spiffe';
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;
const skip = kubectlMissing();

let env: CaEnv;
let plugin: PluginCa;
let work: { path: string; remove: () => Promise<void> };
let signer: K8sSigner;
let ca: CaServer;
const stops: Array<() => Promise<void>> = [];

async function csrFor(uri: string): Promise<string> {
  const { privateKey } = await generateKeyPair();
  return createCsr({ privateKey, uri }).pem;
}

function csrApi(): CertificatesV1Api {
  return env.admin.makeApiClient(CertificatesV1Api);
}

async function csrNames(): Promise<string[]> {
  return (await csrApi().listCertificateSigningRequest()).items.map((c) => c.metadata!.name!);
}

/** Polls (the API, not a timer for logic) until `pred` holds. */
async function eventually<T>(what: string, get: () => Promise<T>, pred: (v: T) => boolean): Promise<T> {
  for (let i = 0; i < 200; i++) {
    const v = await get();
    if (pred(v)) return v;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`never: ${what}`);
}

async function kubeConfigAs(sa: string, ns = 'istio-system'): Promise<KubeConfig> {
  const token = await env.token({ namespace: ns, serviceAccount: sa, audiences: [env.cluster.issuer], expirationSeconds: 3600 });
  const kc = new KubeConfig();
  kc.loadFromString(env.cluster.kubeconfigYaml({ token }));
  return kc;
}

async function startSigner(signerName: string, source: { cacertsSecret?: string } = {}): Promise<K8sSigner> {
  const s = await startK8sSigner({
    config: readK8sSignerConfig({ signerName, cacertsDir: join(work.path, 'cacerts'), opsAddress: '127.0.0.1:0', ...source }, {}),
    kubeConfig: await kubeConfigAs('certbroker-k8s-signer'),
    logger: env.logger,
  });
  stops.push(() => s.stop());
  return s;
}

/** A plaintext CA on the CSR backend (no serving certificate needed), as `kubeConfig`'s account. */
async function plaintextCa(o: { signerName: string; autoApprove: boolean; timeoutMs?: number; kubeConfig?: KubeConfig }): Promise<CaServer> {
  const c = await env.startCa({
    plaintext: true,
    ...(o.kubeConfig ? { clusters: [env.clusterConfig('Kubernetes', { kubeConfig: o.kubeConfig })] } : {}),
    signer: { kind: 'kubernetes-csr', signerName: o.signerName, autoApprove: o.autoApprove, rootsPem: plugin.root.pem, ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}) },
  });
  await waitForIndex(c, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  return c;
}

async function ztunnelToken(): Promise<string> {
  return env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
}

before(async () => {
  if (skip) return;
  work = await tempDir('csr-backend-');
  env = await startCaEnv();
  await env.cluster.apply(identityObjectsOf(await renderDeployWith(['components/kubernetes-csr'])));
  await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
  await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
  plugin = await makePluginCa('CSR-API');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(join(work.path, 'cacerts'));
  await writeCacerts(join(work.path, 'cacerts'), plugin);
  signer = await startSigner(SIGNER);
  // TLS: the CA's own serving certificate comes through the CSR API too.
  ca = await env.startCa({ signer: { kind: 'kubernetes-csr', signerName: SIGNER, autoApprove: true, rootsPem: plugin.root.pem } });
  await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
});

after(async () => {
  for (const s of stops.reverse()) await s();
  await env?.close();
  await work?.remove();
});

test('CreateCertificate through the CSR API: leaf, intermediate, root; an X509-SVID of the asked identity; the CSR is deleted', { skip: skip ?? opensslMissing() }, async () => {
  const client = caClient(ca.port, plugin.root.pem);
  try {
    const res = await client.create({ token: await ztunnelToken(), csr: await csrFor(SLEEP), impersonate: SLEEP, ttlSeconds: 3600 });
    assert.ok(res.chain, JSON.stringify(res));
    assert.equal(res.chain.length, 3);
    assert.equal(checkX509Svid(res.chain[0]!)?.id, SLEEP);
    assert.equal(res.chain[1], plugin.intermediate.pem);
    assert.equal(new X509Certificate(res.chain[2]!).fingerprint256, new X509Certificate(plugin.root.pem).fingerprint256);
    const leaf = new X509Certificate(res.chain[0]!);
    assert.equal(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom), 3600_000 + 120_000, 'expirationSeconds from the TTL (plus the backdate)');
    assert.match(await opensslVerifyChain(res.chain), /OK/);
    await eventually('the CSRs are deleted', csrNames, (names) => names.length === 0);
    // The k8s-signer's ops endpoint: ready, and the issuance counted (the CA's serving certificate too).
    assert.equal((await httpGet(signer.opsPort!, '/readyz')).status, 200);
    assert.equal((await httpGet(signer.opsPort!, '/healthz')).status, 200);
    const metrics = (await httpGet(signer.opsPort!, '/metrics')).body;
    assert.match(metrics, /certbroker_k8s_signer_requests_total\{controller="csr",outcome="issued",reason="svid"\} [1-9]/);
    assert.match(metrics, /certbroker_k8s_signer_requests_total\{controller="csr",outcome="issued",reason="serving"\} [1-9]/);
    assert.match(metrics, /certbroker_k8s_signer_issue_seconds_count\{controller="csr"\} [1-9]/);
  } finally {
    client.close();
  }
});

test('a node agent\'s own SVID with granted serving names: the names go through the CSR into the leaf; a CSR without them is refused', { skip }, async () => {
  const client = caClient(ca.port, plugin.root.pem);
  const ZTUNNEL = `spiffe://${TD}/ns/istio-system/sa/ztunnel`;
  try {
    const { privateKey } = await generateKeyPair();
    const csr = createCsr({ privateKey, uri: ZTUNNEL, servingNames: ['localhost', '127.0.0.1'] }).pem;
    const res = await client.create({ token: await ztunnelToken(), csr, metadata: { [SERVING_NAMES_KEY]: 'localhost,127.0.0.1' } });
    assert.ok(res.chain, JSON.stringify(res));
    const leaf = new X509Certificate(res.chain[0]!);
    assert.equal(leaf.subjectAltName, 'DNS:localhost, IP Address:127.0.0.1, URI:' + ZTUNNEL);
    const without = await client.create({ token: await ztunnelToken(), csr: await csrFor(ZTUNNEL), metadata: { [SERVING_NAMES_KEY]: 'localhost' } });
    assert.equal(without.errorCode, 'ERR_CA_CSR_IDENTITY_MISMATCH', JSON.stringify(without));
  } finally {
    client.close();
  }
});

test("a CSR for another identity than the authorized one is refused by the CA (the signer would sign the CSR's SANs)", { skip }, async () => {
  const client = caClient(ca.port, plugin.root.pem);
  try {
    const res = await client.create({ token: await ztunnelToken(), csr: await csrFor(`spiffe://${TD}/ns/default/sa/other`), impersonate: SLEEP });
    assert.equal(res.code, 3, JSON.stringify(res));
    assert.equal(res.errorCode, 'ERR_CA_CSR_IDENTITY_MISMATCH');
    assert.deepEqual(await csrNames(), []);
  } finally {
    client.close();
  }
});

test('a signer name the deploy/ RBAC does not let the CA approve: UNAVAILABLE with ERR_CA_CSR_API, and the CSR is deleted', { skip }, async () => {
  const other = await plaintextCa({ signerName: 'example.com/other', autoApprove: true });
  const client = caClient(other.port, undefined);
  try {
    const res = await client.create({ token: await ztunnelToken(), csr: await csrFor(SLEEP), impersonate: SLEEP });
    assert.equal(res.code, 14, JSON.stringify(res));
    assert.equal(res.errorCode, 'ERR_CA_CSR_API');
    assert.ok(env.logs.some((l) => l.includes('HTTP 403')), 'the approval was forbidden');
    await eventually('the CSR is deleted', csrNames, (names) => names.length === 0);
  } finally {
    client.close();
  }
});

test('an account without approve on the signer (only certbroker-ca-csr bound) cannot auto-approve: ERR_CA_CSR_API', { skip }, async () => {
  await env.ensureServiceAccount('istio-system', 'ca-no-approve');
  await env.cluster.apply(
    ['certbroker-ca', 'certbroker-ca-csr'].map((role) => ({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `ca-no-approve-${role}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', name: 'ca-no-approve', namespace: 'istio-system' }],
    })),
  );
  const limited = await plaintextCa({ signerName: SIGNER, autoApprove: true, kubeConfig: await kubeConfigAs('ca-no-approve') });
  const client = caClient(limited.port, undefined);
  try {
    const res = await client.create({ token: await ztunnelToken(), csr: await csrFor(SLEEP), impersonate: SLEEP });
    assert.equal(res.errorCode, 'ERR_CA_CSR_API', JSON.stringify(res));
    await eventually('the CSR is deleted', csrNames, (names) => names.length === 0);
  } finally {
    client.close();
  }
});

/** Runs a CreateCertificate on `c` and, once its CSR exists, `kubectl certificate <verb>`s it. */
async function createAndDecide(c: CaServer, verb: 'approve' | 'deny'): Promise<{ result: Awaited<ReturnType<ReturnType<typeof caClient>['create']>>; name: string }> {
  const client = caClient(c.port, undefined);
  try {
    const pending = client.create({ token: await ztunnelToken(), csr: await csrFor(SLEEP), impersonate: SLEEP });
    const [name] = await eventually('the CA created its CSR', csrNames, (names) => names.length === 1);
    const decided = await kubectl(env.cluster, ['certificate', verb, name!]);
    assert.equal(decided.code, 0, decided.stderr);
    assert.match(decided.stdout, new RegExp(`certificatesigningrequest.certificates.k8s.io/${name} ${verb === 'approve' ? 'approved' : 'denied'}`));
    return { result: await pending, name: name! };
  } finally {
    client.close();
  }
}

test('a CSR denied with kubectl certificate deny: PERMISSION_DENIED with ERR_CA_CSR_DENIED', { skip }, async () => {
  const manual = await plaintextCa({ signerName: SIGNER, autoApprove: false });
  const { result } = await createAndDecide(manual, 'deny');
  assert.equal(result.code, 7, JSON.stringify(result));
  assert.equal(result.errorCode, 'ERR_CA_CSR_DENIED');
  await eventually('the CSR is deleted', csrNames, (names) => names.length === 0);
});

test("the roots file is re-read during a root rotation: answers carry old -> both -> new roots without a restart, and the answer check follows the file", { skip }, async () => {
  const other = await makePluginCa('CSR-API-NEXT');
  const rootsFile = join(work.path, 'csr-roots.pem');
  await writeFile(rootsFile, plugin.root.pem);
  const rotating = await env.startCa({
    plaintext: true,
    signer: { kind: 'kubernetes-csr', signerName: SIGNER, autoApprove: true, rootsPem: plugin.root.pem, rootsFile },
  });
  await waitForIndex(rotating, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
  const client = caClient(rotating.port, undefined);
  const fingerprints = (bundle: string) => (bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((p) => new X509Certificate(p).fingerprint256);
  const ask = async () => client.create({ token: await ztunnelToken(), csr: await csrFor(SLEEP), impersonate: SLEEP, ttlSeconds: 3600 });
  const oldFp = new X509Certificate(plugin.root.pem).fingerprint256;
  const newFp = new X509Certificate(other.root.pem).fingerprint256;
  try {
    const before = await ask();
    assert.deepEqual(fingerprints(before.chain!.at(-1)!), [oldFp], JSON.stringify(before));
    // Overlap: both roots in the file; the k8s-signer still signs under the old one.
    await writeFile(`${rootsFile}.tmp`, plugin.root.pem + other.root.pem);
    await rename(`${rootsFile}.tmp`, rootsFile);
    const overlap = await eventually('answers carry both roots (the file re-read at its poll)', ask, (r) => r.chain !== undefined && fingerprints(r.chain.at(-1)!).length === 2);
    assert.deepEqual(fingerprints(overlap.chain!.at(-1)!), [oldFp, newFp]);
    assert.equal(checkX509Svid(overlap.chain![0]!)?.id, SLEEP);
    // The new root only: a leaf that chains to the old root (the k8s-signer was not rotated) is no
    // longer accepted — the CA checks answers against the roots it re-read, not the ones it started with.
    await writeFile(`${rootsFile}.tmp`, other.root.pem);
    await rename(`${rootsFile}.tmp`, rootsFile);
    const after = await eventually('answers under the old root are refused', ask, (r) => r.chain === undefined);
    assert.equal(after.errorCode, 'ERR_CA_CSR_BAD_CERTIFICATE', JSON.stringify(after));
    await eventually('the CSRs are deleted', csrNames, (names) => names.length === 0);
  } finally {
    client.close();
  }
});

test('a caller that gives up (its gRPC deadline) ends the wait for the CSR at once: the CSR is deleted long before the 120 s CSR timeout', { skip }, async () => {
  const waiting = await plaintextCa({ signerName: 'certbroker.io/nobody-signs', autoApprove: false, timeoutMs: 120_000 });
  const client = caClient(waiting.port, undefined);
  try {
    const res = await client.create({ token: await ztunnelToken(), csr: await csrFor(SLEEP), impersonate: SLEEP, ttlSeconds: 3600, deadlineMs: 1500 });
    assert.equal(res.code, 4, JSON.stringify(res));
    await eventually('the CSR is deleted once the caller gave up', csrNames, (names) => names.length === 0);
  } finally {
    client.close();
  }
});

test('a signer without sign permission on its signerName cannot issue: the CA times out with DEADLINE_EXCEEDED (ERR_CA_CSR_TIMEOUT)', { skip }, async () => {
  const unsigned = 'certbroker.io/not-granted';
  const powerless = await startSigner(unsigned);
  const waiting = await plaintextCa({ signerName: unsigned, autoApprove: false, timeoutMs: 1500 });
  const { result } = await createAndDecide(waiting, 'approve');
  assert.equal(result.code, 4, JSON.stringify(result));
  assert.equal(result.errorCode, 'ERR_CA_CSR_TIMEOUT');
  const metrics = await powerless.registry.getSingleMetricAsString('certbroker_k8s_signer_requests_total');
  assert.match(metrics, /outcome="retried"/, 'the signer tried and was forbidden');
  await eventually('the CSR is deleted', csrNames, (names) => names.length === 0);
});

for (const [what, make, reason] of [
  ['a DNS name from a requester that may not have serving certificates', () => generateKeyPair().then(({ privateKey }) => createCsr({ privateKey, servingNames: ['evil.example.com'] }).pem), 'SANNotAllowed'],
  ['a SPIFFE ID of another trust domain', () => csrFor('spiffe://elsewhere.example/ns/default/sa/sleep'), 'SPIFFEIDNotAllowed'],
  ['a URI and a DNS name', () => generateKeyPair().then(({ privateKey }) => createCsr({ privateKey, uri: SLEEP, servingNames: ['sleep.default.svc'] }).pem), 'SANNotAllowed'],
] as const) {
  test(`the k8s-signer refuses ${what} with a Failed condition (${reason})`, { skip }, async () => {
    const name = `bad-${reason.toLowerCase()}-${Math.random().toString(16).slice(2, 8)}`;
    await csrApi().createCertificateSigningRequest({
      body: { metadata: { name }, spec: { request: Buffer.from(await make()).toString('base64'), signerName: SIGNER, usages: ['digital signature', 'client auth'], expirationSeconds: 3600 } },
    });
    const approved = await kubectl(env.cluster, ['certificate', 'approve', name]);
    assert.equal(approved.code, 0, approved.stderr);
    const failed = await eventually('a Failed condition', () => csrApi().readCertificateSigningRequest({ name }), (c) => (c.status?.conditions ?? []).some((x) => x.type === 'Failed'));
    const condition = failed.status!.conditions!.find((x) => x.type === 'Failed')!;
    assert.equal(condition.status, 'True');
    assert.equal(condition.reason, reason);
    assert.equal(failed.status?.certificate, undefined, 'no certificate');
    await csrApi().deleteCertificateSigningRequest({ name });
  });
}

test('the k8s-signer reads its plug-in CA from a Secret (RBAC: get/list/watch on that Secret by name) and follows its rotation', { skip }, async () => {
  const name = 'certbroker.io/from-secret';
  const b = await makePluginCa('Secret-B');
  const c = await makePluginCa('Secret-C');
  const secretData = (ca: PluginCa) => Object.fromEntries(Object.entries(cacertsFiles(ca)).map(([k, v]) => [k, Buffer.from(v).toString('base64')]));
  await env.core.createNamespacedSecret({ namespace: 'istio-system', body: { metadata: { name: 'cacerts-b' }, data: secretData(b) } });
  const rbac = (kind: 'Role' | 'ClusterRole', rules: object[]) => [
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind, metadata: { name: 'secret-signer', ...(kind === 'Role' ? { namespace: 'istio-system' } : {}) }, rules },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: `${kind}Binding`,
      metadata: { name: 'secret-signer', ...(kind === 'Role' ? { namespace: 'istio-system' } : {}) },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name: 'secret-signer' },
      subjects: [{ kind: 'ServiceAccount', name: 'certbroker-k8s-signer', namespace: 'istio-system' }],
    },
  ];
  await env.cluster.apply([
    ...rbac('Role', [{ apiGroups: [''], resources: ['secrets'], resourceNames: ['cacerts-b'], verbs: ['get', 'list', 'watch'] }]),
    ...rbac('ClusterRole', [{ apiGroups: ['certificates.k8s.io'], resources: ['signers'], resourceNames: [name], verbs: ['sign'] }]),
  ]);
  const fromSecret = await startSigner(name, { cacertsSecret: 'istio-system/cacerts-b' });
  assert.equal(fromSecret.ca.description, 'cacerts-secret:istio-system/cacerts-b');
  assert.equal(fromSecret.ca.notReadyReason, undefined, 'the CA is loaded from the Secret once started');
  await eventually('the signer is ready', async () => fromSecret.problem(), (p) => p === undefined);
  const issue = async (csrName: string) => {
    await csrApi().createCertificateSigningRequest({ body: { metadata: { name: csrName }, spec: { request: Buffer.from(await csrFor(SLEEP)).toString('base64'), signerName: name, usages: ['digital signature', 'client auth'] } } });
    assert.equal((await kubectl(env.cluster, ['certificate', 'approve', csrName])).code, 0);
    const done = await eventually('issued', () => csrApi().readCertificateSigningRequest({ name: csrName }), (x) => Boolean(x.status?.certificate));
    await csrApi().deleteCertificateSigningRequest({ name: csrName });
    return Buffer.from(done.status!.certificate!, 'base64').toString('utf8');
  };
  const issuedByB = await issue('from-secret-1');
  assert.ok(new X509Certificate(issuedByB).checkIssued(new X509Certificate(b.intermediate.pem)), 'signed by the Secret\'s intermediate');
  await env.core.replaceNamespacedSecret({ namespace: 'istio-system', name: 'cacerts-b', body: { metadata: { name: 'cacerts-b' }, data: secretData(c) } });
  await eventually('the new CA is installed', async () => fromSecret.ca.roots().join(''), (r) => new X509Certificate(r).fingerprint256 === new X509Certificate(c.root.pem).fingerprint256);
  const issuedByC = await issue('from-secret-2');
  assert.ok(new X509Certificate(issuedByC).checkIssued(new X509Certificate(c.intermediate.pem)), 'signed by the rotated intermediate');
});

test('Python grpcio gets a certificate through the CA on the CSR backend', { skip: skip ?? pythonGrpcMissing() }, async () => {
  const stubs = join(work.path, 'py');
  const { mkdir } = await import('node:fs/promises');
  await mkdir(stubs);
  await writeCaStubs(stubs);
  await writeFile(join(work.path, 'roots.pem'), ca.rootsPem());
  await writeFile(join(work.path, 'csr.pem'), await csrFor(SLEEP));
  await writeFile(join(work.path, 'token'), await ztunnelToken());
  const res = await interopCall({ stubs, target: `127.0.0.1:${ca.port}`, rootsFile: join(work.path, 'roots.pem'), csrFile: join(work.path, 'csr.pem'), tokenFile: join(work.path, 'token'), impersonate: SLEEP, ttlSeconds: 7200 });
  assert.ok(res.cert_chain, JSON.stringify(res));
  assert.equal(res.cert_chain.length, 3);
  assert.equal(checkX509Svid(res.cert_chain[0]!)?.id, SLEEP);
  assert.equal(res.cert_chain[2], ca.rootsPem());
});
