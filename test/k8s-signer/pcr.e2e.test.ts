/**
 * Kubelet-projected pod certificates end to end: the devcluster (HTTPS, deploy/ RBAC enforced)
 * with its simulated kubelet making PodCertificateRequests as the pod's node, and
 * `certbroker k8s-signer` (its PCR controller, as the deploy/ service account, a plug-in CA)
 * issuing X509-SVIDs for them. The credential bundle lands in the pod's volume directory and
 * real openssl verifies it; unsupported keys and unknown annotations are Denied; a request for
 * a pod on another node is refused by NodeRestriction; refresh happens at beginRefreshAt plus
 * the kubelet's jitter, on the fake clock; `kubectl get pcr` lists them.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { X509Certificate, createPublicKey } from 'node:crypto';
import { FakeClock } from '../support/fake-clock.js';
import { seededRng } from '../support/seeded-rng.js';
import { Scratch } from '../support/scratch.js';
import { opensslMissing, kubectlMissing } from '../support/tools.js';
import { adminClient, clientsFor, createNode, createServiceAccount, kubeConfigFor, kubectl, rawRequest, serviceAccountToken, startCluster, type DevCluster } from '../support/cluster.js';
import { identityObjectsOf, renderDeployWith } from '../deploy/manifests.js';
import { makePluginCa, opensslVerifyChain, writeCacerts, type PluginCa } from '../ca/support/pki-fixtures.js';
import { readK8sSignerConfig, startK8sSigner, type K8sSigner } from '../../src/k8s-signer/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { silentLogger } from '../../src/core/log.js';
import { generateProvenKey } from '../../src/devcluster/pod-certificate-keys.js';
import { createCsr, generateKeyPair } from '../../src/pki/index.js';

const SIGNER = 'certbroker.io/spiffe';
const NS = 'pcr-e2e';
const skip = opensslMissing() ?? kubectlMissing();
const scratch = Scratch.forFile('pcr-e2e-');
const clock = new FakeClock(Date.now());
let cluster: DevCluster;
let signer: K8sSigner;
let ca: PluginCa;

function run(cmd: string, args: readonly string[], stdin?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout: 20_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${cmd} ${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout)));
    if (stdin !== undefined) child.stdin?.end(stdin);
  });
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined>, attempts = 4000): Promise<T> {
  for (let i = 0; i < attempts; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function pcrs(): Promise<Array<Record<string, any>>> {
  const r = await rawRequest(cluster, 'GET', `/apis/certificates.k8s.io/v1beta1/namespaces/${NS}/podcertificaterequests`);
  return (JSON.parse(r.text) as { items: Array<Record<string, any>> }).items;
}

const stateOf = (pcr: Record<string, any>): string | undefined => (pcr.status?.conditions as Array<{ type: string; status: string }> | undefined)?.find((c) => c.status === 'True')?.type;

async function createCertPod(name: string, sources: readonly Record<string, unknown>[], node = 'node-a'): Promise<string> {
  const body = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: {
      serviceAccountName: 'web',
      nodeName: node,
      containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }],
      volumes: [{ name: 'svid', projected: { sources: sources.map((s) => ({ podCertificate: { signerName: SIGNER, ...s } })) } }],
    },
  };
  const r = await rawRequest(cluster, 'POST', `/api/v1/namespaces/${NS}/pods`, { body: JSON.stringify(body), contentType: 'application/json' });
  assert.equal(r.code, 201, r.text);
  return (JSON.parse(r.text) as { metadata: { uid: string } }).metadata.uid;
}

async function podPhase(name: string): Promise<string | undefined> {
  return (await adminClient(cluster).core.readNamespacedPod({ namespace: NS, name })).status?.phase;
}

function volumeFile(uid: string, path: string): Promise<string> {
  return readFile(join(scratch.dir, 'pods', uid, 'volumes', 'kubernetes.io~projected', 'svid', path), 'utf8');
}

function pemBlocks(text: string): Array<{ type: string; pem: string }> {
  return [...text.matchAll(/-----BEGIN ([A-Z ]+)-----[\s\S]*?-----END \1-----\n/g)].map((m) => ({ type: m[1]!, pem: m[0] }));
}

before(async () => {
  if (skip) return;
  cluster = await startCluster({ clock, podsDir: join(scratch.dir, 'pods'), rng: seededRng(7) });
  await cluster.apply(identityObjectsOf(await renderDeployWith(['components/kubernetes-csr', 'components/pod-certificates'])));
  await createNode(cluster, { name: 'node-a' });
  await createNode(cluster, { name: 'node-b' });
  await adminClient(cluster).core.createNamespace({ body: { metadata: { name: NS } } });
  await createServiceAccount(cluster, { namespace: NS, name: 'web' });
  ca = await makePluginCa();
  await writeCacerts(scratch.dir, ca);
  const token = await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'certbroker-k8s-signer', expirationSeconds: 48 * 3600 });
  const config = readK8sSignerConfig({ signerName: SIGNER, trustDomain: 'cluster.local', cacertsDir: scratch.dir, opsAddress: 'off' }, { K8S_SIGNER_CONTROLLERS: 'pcr' });
  signer = await startK8sSigner({ config, kubeConfig: kubeConfigFor(cluster, token), clock, rng: seededRng(3), logger: silentLogger });
});

after(async () => {
  await signer?.stop();
  await cluster?.close();
});

test('a pod with podCertificate volumes starts with an X509-SVID bundle that openssl verifies', { skip }, async () => {
  const uid = await createCertPod('web-1', [
    { keyType: 'ECDSAP256', credentialBundlePath: 'credentialbundle.pem' },
    { keyType: 'RSA3072', keyPath: 'rsa/tls.key', certificateChainPath: 'rsa/tls.crt', maxExpirationSeconds: 7200 },
  ]);
  await eventually('web-1 Running', async () => ((await podPhase('web-1')) === 'Running' ? true : undefined));
  const bundle = pemBlocks(await volumeFile(uid, 'credentialbundle.pem'));
  assert.deepEqual(bundle.map((b) => b.type), ['PRIVATE KEY', 'CERTIFICATE', 'CERTIFICATE'], 'key first, then leaf and intermediate');
  const [key, leaf, intermediate] = bundle.map((b) => b.pem) as [string, string, string];
  assert.equal(intermediate, ca.intermediate.pem);
  assert.match(await opensslVerifyChain([leaf, intermediate, ca.root.pem]), /leaf\.pem: OK/);
  assert.equal(checkX509Svid(leaf)?.id, `spiffe://cluster.local/ns/${NS}/sa/web`);
  const keyPub = await run('openssl', ['pkey', '-pubout'], key);
  const certPub = await run('openssl', ['x509', '-noout', '-pubkey'], leaf);
  assert.equal(keyPub, certPub, 'the bundle key is the certified key');
  assert.match(await run('openssl', ['x509', '-noout', '-text'], leaf), /ASN1 OID: prime256v1/);

  const rsaKey = await volumeFile(uid, 'rsa/tls.key');
  const rsaChain = pemBlocks(await volumeFile(uid, 'rsa/tls.crt')).map((b) => b.pem);
  assert.match(rsaKey, /^-----BEGIN PRIVATE KEY-----/);
  assert.equal(rsaChain.length, 2);
  assert.equal(createPublicKey(rsaKey).asymmetricKeyDetails?.modulusLength, 3072);
  assert.equal(await run('openssl', ['pkey', '-pubout'], rsaKey), await run('openssl', ['x509', '-noout', '-pubkey'], rsaChain[0]!));
  const rsaLeaf = new X509Certificate(rsaChain[0]!);
  assert.equal(Date.parse(rsaLeaf.validTo) - Date.parse(rsaLeaf.validFrom), 7200_000, 'lifetime = maxExpirationSeconds, backdate included');

  const mine = (await pcrs()).filter((p) => p.spec.podName === 'web-1');
  assert.equal(mine.length, 2);
  for (const p of mine) {
    assert.equal(stateOf(p), 'Issued');
    assert.equal(p.metadata.ownerReferences[0].uid, uid);
    const x = new X509Certificate(pemBlocks(p.status.certificateChain)[0]!.pem);
    assert.equal(Date.parse(p.status.notBefore), Date.parse(x.validFrom));
    assert.equal(Date.parse(p.status.notAfter), Date.parse(x.validTo));
    const refresh = Date.parse(p.status.beginRefreshAt);
    assert.equal(refresh, Date.parse(p.status.notBefore) + (Date.parse(p.status.notAfter) - Date.parse(p.status.notBefore)) / 2);
  }
  const metrics = await signer.registry.getSingleMetricAsString('certbroker_k8s_signer_requests_total');
  assert.match(metrics, /controller="pcr",outcome="issued",reason="svid"} 2/);

  const table = await kubectl(cluster, ['get', 'pcr', '-n', NS, '-o', 'wide']);
  assert.equal(table.code, 0, table.stderr);
  assert.match(table.stdout, /^NAME\s+SIGNERNAME\s+POD\s+SERVICEACCOUNT\s+NODE\s+STATE\s+AGE/m);
  assert.equal((table.stdout.match(/certbroker\.io\/spiffe\s+web-1\s+web\s+node-a\s+Issued/g) ?? []).length, 2);

  await adminClient(cluster).core.deleteNamespacedPod({ namespace: NS, name: 'web-1' });
  await eventually('the pod volume torn down', async () => ((await volumeFile(uid, 'credentialbundle.pem').then(() => false, () => true)) ? true : undefined));
});

test('unsupported key types and unknown annotation keys are Denied; the pod does not start', { skip }, async () => {
  const ed = await createCertPod('web-ed25519', [{ keyType: 'ED25519', credentialBundlePath: 'b.pem' }]);
  const annotated = await createCertPod('web-annotated', [{ keyType: 'ECDSAP256', credentialBundlePath: 'b.pem', userAnnotations: { 'example.com/audience': 'x' } }]);
  const denied = async (pod: string) => eventually(`${pod} denied`, async () => (await pcrs()).find((p) => p.spec.podName === pod && stateOf(p) === 'Denied'));
  const edPcr = await denied('web-ed25519');
  const condition = edPcr.status.conditions.find((c: { type: string }) => c.type === 'Denied');
  assert.equal(condition.reason, 'UnsupportedKeyType');
  assert.match(condition.message, /suggested: ECDSAP256/);
  assert.equal(edPcr.status.certificateChain, undefined);
  const annPcr = await denied('web-annotated');
  assert.equal(annPcr.status.conditions[0].reason, 'InvalidUnverifiedUserAnnotations');
  assert.match(annPcr.status.conditions[0].message, /"example\.com\/audience"/);
  await eventually('kubelet sees the denial', async () => (cluster.podCertificateStates(ed)[0]?.state === 'denied' && cluster.podCertificateStates(annotated)[0]?.state === 'denied' ? true : undefined));
  assert.equal(await podPhase('web-ed25519'), 'Pending', 'a denied pod certificate keeps the pod from starting');
  const events = await adminClient(cluster).core.listNamespacedEvent({ namespace: NS, fieldSelector: 'involvedObject.name=web-ed25519' });
  const warning = events.items.find((e) => e.reason === 'Denied');
  assert.equal(warning?.type, 'Warning');
  assert.equal(warning?.source?.component, 'kubelet');
  assert.match(warning?.message ?? '', /was denied, reason="UnsupportedKeyType"/);
  const metrics = await signer.registry.getSingleMetricAsString('certbroker_k8s_signer_requests_total');
  assert.match(metrics, /controller="pcr",outcome="refused",reason="UnsupportedKeyType"} 1/);
});

test('NodeRestriction over kubectl: another node cannot get a certificate for the pod; the node\'s own stub PKCS#10 request is signed for the CSR\'s key', { skip }, async () => {
  const uid = await createCertPod('web-guarded', [{ keyType: 'ECDSAP256', credentialBundlePath: 'b.pem' }]);
  const sa = await adminClient(cluster).core.readNamespacedServiceAccount({ namespace: NS, name: 'web' });
  const nodeB = await adminClient(cluster).core.readNode({ name: 'node-b' });
  const key = await generateProvenKey('ECDSAP256', uid);
  const pcr = {
    apiVersion: 'certificates.k8s.io/v1beta1',
    kind: 'PodCertificateRequest',
    metadata: { name: 'stolen', namespace: NS },
    spec: {
      signerName: SIGNER, podName: 'web-guarded', podUID: uid, serviceAccountName: 'web', serviceAccountUID: sa.metadata!.uid,
      nodeName: 'node-b', nodeUID: nodeB.metadata!.uid, pkixPublicKey: key.spkiDer.toString('base64'), proofOfPossession: key.proof.toString('base64'),
    },
  };
  const r = await kubectl(cluster, ['create', '-f', '-', '--as', 'system:node:node-b', '--as-group', 'system:nodes'], { stdin: JSON.stringify(pcr) });
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /podcertificaterequests\.certificates\.k8s\.io "stolen" is forbidden: pod "pcr-e2e\/web-guarded" is not running on node "node-b"/);
  assert.equal((await pcrs()).some((p) => p.metadata.name === 'stolen'), false);
  const nodeA = { nodeName: 'node-a', nodeUID: (await adminClient(cluster).core.readNode({ name: 'node-a' })).metadata!.uid };
  const mine = await kubectl(cluster, ['create', '-f', '-', '--as', 'system:node:node-a', '--as-group', 'system:nodes'], { stdin: JSON.stringify({ ...pcr, spec: { ...pcr.spec, ...nodeA } }) });
  assert.equal(mine.code, 0, mine.stderr);

  // 1.36's form: a stub PKCS#10 instead of pkixPublicKey + proofOfPossession; the leaf gets the CSR's key.
  const keys = await generateKeyPair({ kind: 'ec', curve: 'P-384' });
  const csr = createCsr({ privateKey: keys.privateKey, uri: 'spiffe://ignored/by/the/signer' });
  const { pkixPublicKey: _k, proofOfPossession: _p, ...rest } = pcr.spec;
  const stub = { ...pcr, metadata: { name: 'stub', namespace: NS }, spec: { ...rest, ...nodeA, stubPKCS10Request: Buffer.from(csr.der).toString('base64') } };
  const created = await kubectl(cluster, ['create', '-f', '-', '--as', 'system:node:node-a', '--as-group', 'system:nodes'], { stdin: JSON.stringify(stub) });
  assert.equal(created.code, 0, created.stderr);
  const issued = await eventually('the stub request issued', async () => (await pcrs()).find((p) => p.metadata.name === 'stub' && stateOf(p) === 'Issued'));
  const leaf = new X509Certificate(pemBlocks(issued.status.certificateChain)[0]!.pem);
  assert.ok(leaf.publicKey.equals(keys.publicKey), 'certified: the stub CSR\'s key');
  assert.equal(checkX509Svid(leaf.toString())?.id, `spiffe://cluster.local/ns/${NS}/sa/web`, 'the identity is the service account\'s, not the CSR\'s SAN');
});

test('the kubelet refreshes at beginRefreshAt plus up to 5 minutes of jitter, on the injected clock', { skip }, async () => {
  const uid = await createCertPod('web-refresh', [{ keyType: 'ECDSAP256', credentialBundlePath: 'b.pem', maxExpirationSeconds: 3600 }]);
  await eventually('web-refresh Running', async () => ((await podPhase('web-refresh')) === 'Running' ? true : undefined));
  const first = await volumeFile(uid, 'b.pem');
  const [original] = (await pcrs()).filter((p) => p.spec.podName === 'web-refresh');
  const refreshAt = Date.parse(original!.status.beginRefreshAt);
  assert.equal(refreshAt - Date.parse(original!.status.notBefore), 30 * 60_000, 'half of the hour');
  clock.advance(refreshAt - clock.now() - 1000);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal((await pcrs()).filter((p) => p.spec.podName === 'web-refresh').length, 1, 'nothing before beginRefreshAt');
  clock.advance(5 * 60_000 + 2000);
  const renewed = await eventually('a refreshed bundle', async () => {
    const now = await volumeFile(uid, 'b.pem');
    return now !== first ? now : undefined;
  });
  const all = (await pcrs()).filter((p) => p.spec.podName === 'web-refresh');
  assert.equal(all.length, 2);
  assert.ok(all.every((p) => stateOf(p) === 'Issued'));
  const [key, leaf] = pemBlocks(renewed).map((b) => b.pem) as [string, string];
  assert.notEqual(key, pemBlocks(first)[0]!.pem, 'a fresh key for each request');
  const x = new X509Certificate(leaf);
  assert.ok(Date.parse(x.validFrom) >= refreshAt - 2 * 60_000, 'the new leaf starts at the refresh (2-minute backdate)');
  assert.equal(await run('openssl', ['pkey', '-pubout'], key), await run('openssl', ['x509', '-noout', '-pubkey'], leaf));
  const at = String(Math.floor((clock.now() + 60_000) / 1000));
  const dir = Scratch.create('pcr-verify-');
  try {
    await dir.write('root.pem', ca.root.pem);
    await dir.write('int.pem', ca.intermediate.pem);
    await dir.write('leaf.pem', leaf);
    assert.match(await run('openssl', ['verify', '-attime', at, '-CAfile', dir.path('root.pem'), '-untrusted', dir.path('int.pem'), dir.path('leaf.pem')]), /OK/);
  } finally {
    await dir.remove();
  }
});

test('deploy/ RBAC: the k8s-signer account follows requests, writes /status and signs for its signer only', { skip }, async () => {
  const token = await serviceAccountToken(cluster, { namespace: 'istio-system', serviceAccountName: 'certbroker-k8s-signer' });
  const { authz } = clientsFor(kubeConfigFor(cluster, token));
  const can = async (verb: string, resource: string, o: { subresource?: string; name?: string } = {}) =>
    (await authz.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: { verb, group: 'certificates.k8s.io', resource, ...o } } } })).status?.allowed === true;
  assert.equal(await can('watch', 'podcertificaterequests'), true);
  assert.equal(await can('update', 'podcertificaterequests', { subresource: 'status' }), true);
  assert.equal(await can('sign', 'signers', { name: SIGNER }), true);
  assert.equal(await can('sign', 'signers', { name: 'kubernetes.io/kube-apiserver-client-pod' }), false);
  assert.equal(await can('create', 'podcertificaterequests'), false, 'only nodes create requests');
  assert.equal(await can('update', 'podcertificaterequests'), false, 'the spec is not the signer\'s');
  const deployment = (await renderDeployWith(['components/kubernetes-csr', 'components/pod-certificates'])).find((o) => o.kind === 'Deployment' && o.metadata.name === 'certbroker-k8s-signer') as unknown as {
    spec: { template: { spec: { containers: Array<{ env: Array<{ name: string; value: string }> }> } } };
  };
  const env = Object.fromEntries(deployment.spec.template.spec.containers[0]!.env.map((e) => [e.name, e.value]));
  const config = readK8sSignerConfig({ opsAddress: 'off' }, env);
  assert.deepEqual(config.controllers, ['csr', 'pcr'], 'the component turns the PCR controller on');
  assert.equal(config.signerName, SIGNER, 'for the signer name its RBAC may sign for');
});
