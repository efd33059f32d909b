/**
 * The devcluster driven by the real kubectl (v1.32): typed commands (protobuf bodies),
 * `create -f` (JSON with server-side field validation), TokenRequest/TokenReview, RBAC with
 * `auth can-i`, and a field-selected watch.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { startCluster, kubectl, type DevCluster } from '../support/cluster.js';
import { kubectlMissing } from '../support/tools.js';
import { tempDirSync } from '../support/scratch.js';

const skip = kubectlMissing();
let cluster: DevCluster;
before(async () => {
  cluster = await startCluster();
});
after(() => cluster.close());

async function ok(args: string[], o: { stdin?: string; token?: string } = {}): Promise<string> {
  const r = await kubectl(cluster, args, o);
  assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

const POD = (ns: string, name: string, sa: string, node: string) =>
  JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: ns }, spec: { serviceAccountName: sa, nodeName: node, containers: [{ name: 'c', image: 'pause' }] } });

test('kubectl creates a namespace, service account and pod; a pod-bound token reviews as authenticated until the pod is deleted', { skip }, async () => {
  assert.equal(await ok(['create', 'namespace', 'mesh']), 'namespace/mesh created\n');
  assert.equal(await ok(['-n', 'mesh', 'create', 'serviceaccount', 'ztunnel']), 'serviceaccount/ztunnel created\n');
  assert.equal(await ok(['create', '-f', '-'], { stdin: POD('mesh', 'ztunnel-x', 'ztunnel', 'node-x') }), 'pod/ztunnel-x created\n');
  const uid = await ok(['-n', 'mesh', 'get', 'pod', 'ztunnel-x', '-o', 'jsonpath={.metadata.uid}']);
  assert.match(uid, /^[0-9a-f-]{36}$/);

  const token = (await ok(['-n', 'mesh', 'create', 'token', 'ztunnel', '--audience', 'istio-ca', '--bound-object-kind', 'Pod', '--bound-object-name', 'ztunnel-x'])).trim();
  assert.equal(decodeProtectedHeader(token).alg, 'ES256');
  const claims = decodeJwt(token);
  assert.equal(claims.sub, 'system:serviceaccount:mesh:ztunnel');
  assert.deepEqual(claims.aud, ['istio-ca']);
  assert.deepEqual((claims['kubernetes.io'] as { pod: unknown }).pod, { name: 'ztunnel-x', uid });

  const review = JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: ['istio-ca'] } });
  const before = JSON.parse(await ok(['create', '-f', '-', '-o', 'json'], { stdin: review })) as { status: { authenticated?: boolean; audiences?: string[]; user: { username?: string; groups?: string[]; extra?: Record<string, string[]> } } };
  assert.equal(before.status.authenticated, true);
  assert.deepEqual(before.status.audiences, ['istio-ca']);
  assert.equal(before.status.user.username, 'system:serviceaccount:mesh:ztunnel');
  assert.deepEqual(before.status.user.groups, ['system:serviceaccounts', 'system:serviceaccounts:mesh', 'system:authenticated']);
  assert.deepEqual(before.status.user.extra?.['authentication.kubernetes.io/pod-name'], ['ztunnel-x']);
  assert.deepEqual(before.status.user.extra?.['authentication.kubernetes.io/pod-uid'], [uid]);
  assert.match(before.status.user.extra?.['authentication.kubernetes.io/credential-id']?.[0] ?? '', /^JTI=[0-9a-f-]{36}$/);

  // Wrong audience: not authenticated.
  const wrongAud = JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences: ['other'] } });
  const mismatch = JSON.parse(await ok(['create', '-f', '-', '-o', 'json'], { stdin: wrongAud })) as { status: { authenticated?: boolean } };
  assert.notEqual(mismatch.status.authenticated, true);

  await ok(['-n', 'mesh', 'delete', 'pod', 'ztunnel-x', '--wait=true']);
  const afterDelete = JSON.parse(await ok(['create', '-f', '-', '-o', 'json'], { stdin: review })) as { status: { authenticated?: boolean; error?: string } };
  assert.notEqual(afterDelete.status.authenticated, true);
  assert.match(afterDelete.status.error ?? '', /invalidated/);
});

test('kubectl auth can-i answers from RBAC (impersonating, and as the service account itself)', { skip }, async () => {
  await ok(['create', 'namespace', 'team']);
  await ok(['-n', 'team', 'create', 'serviceaccount', 'bot']);
  const canI = async (args: string[], o: { token?: string } = {}) => {
    const r = await kubectl(cluster, ['auth', 'can-i', ...args], o);
    return r.stdout.trim();
  };
  assert.equal(await canI(['list', 'pods', '-n', 'team', '--as', 'system:serviceaccount:team:bot']), 'no');
  await ok(['-n', 'team', 'create', 'role', 'pod-reader', '--verb=get,list,watch', '--resource=pods']);
  await ok(['-n', 'team', 'create', 'rolebinding', 'bot-reads', '--role=pod-reader', '--serviceaccount=team:bot']);
  assert.equal(await canI(['list', 'pods', '-n', 'team', '--as', 'system:serviceaccount:team:bot']), 'yes');
  assert.equal(await canI(['delete', 'pods', '-n', 'team', '--as', 'system:serviceaccount:team:bot']), 'no');
  assert.equal(await canI(['list', 'pods', '-n', 'default', '--as', 'system:serviceaccount:team:bot']), 'no');
  await ok(['create', 'clusterrole', 'token-maker', '--verb=create', '--resource=serviceaccounts/token', '--resource-name=bot']);
  await ok(['create', 'clusterrolebinding', 'bot-tokens', '--clusterrole=token-maker', '--serviceaccount=team:bot']);
  assert.equal(await canI(['create', 'serviceaccounts/token', '-n', 'team', '--as', 'system:serviceaccount:team:bot']), 'no');
  assert.equal(await canI(['create', 'serviceaccounts/bot', '--subresource=token', '-n', 'team', '--as', 'system:serviceaccount:team:bot']), 'yes');

  // The service account's own token (API audience): SelfSubjectAccessReview as itself.
  const own = (await ok(['-n', 'team', 'create', 'token', 'bot'])).trim();
  assert.equal(await canI(['get', 'pods', '-n', 'team'], { token: own }), 'yes');
  assert.equal(await canI(['get', 'secrets', '-n', 'team'], { token: own }), 'no');
  const denied = await kubectl(cluster, ['-n', 'team', 'get', 'secrets'], { token: own });
  assert.notEqual(denied.code, 0);
  assert.match(denied.stderr, /secrets is forbidden: User "system:serviceaccount:team:bot" cannot list resource "secrets" in API group "" in the namespace "team"/);
});

test('kubectl get pods --field-selector spec.nodeName=N --watch sees adds and deletes on that node only', { skip }, async () => {
  await ok(['create', 'namespace', 'watched']);
  const dir = tempDirSync('kubectl-watch-');
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, cluster.kubeconfigYaml({ token: cluster.adminToken }), { mode: 0o600 });
  const child = spawn('kubectl', [
    '--kubeconfig', kubeconfig, 'get', 'pods', '-A', '--field-selector', 'spec.nodeName=node-w', '--watch', '--output-watch-events',
    '-o', 'jsonpath={.type} {.object.metadata.namespace}/{.object.metadata.name}{"\\n"}',
  ], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir } });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const seen = async (line: string) => {
    for (let i = 0; i < 2000 && !out.split('\n').includes(line); i++) await new Promise((r) => setTimeout(r, 5));
    assert.ok(out.split('\n').includes(line), `watch output lacks "${line}":\n${out}`);
  };
  try {
    await ok(['create', '-f', '-'], { stdin: POD('watched', 'early', 'default', 'node-w') });
    await seen('ADDED watched/early');
    await ok(['create', '-f', '-'], { stdin: POD('watched', 'elsewhere', 'default', 'node-other') });
    await ok(['create', '-f', '-'], { stdin: POD('watched', 'late', 'default', 'node-w') });
    await seen('ADDED watched/late');
    await ok(['-n', 'watched', 'delete', 'pod', 'early', '--wait=true']);
    await seen('DELETED watched/early');
    assert.ok(!out.includes('elsewhere'), 'pods on other nodes never show up');
  } finally {
    child.kill();
    await rm(dir, { recursive: true, force: true });
  }
});

test('kubectl get prints server-side Tables (pods with READY/STATUS/IP/NODE, namespaces with STATUS)', { skip }, async () => {
  await ok(['create', 'namespace', 'tables']);
  await ok(['create', '-f', '-'], { stdin: POD('tables', 'runner', 'default', 'node-t') });
  let wide = '';
  for (let i = 0; i < 200 && !/Running/.test(wide); i++) wide = await ok(['-n', 'tables', 'get', 'pods', '-o', 'wide']);
  const [header, row] = wide.trim().split('\n');
  assert.deepEqual(header!.split(/\s{2,}/), ['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'IP', 'NODE', 'NOMINATED NODE', 'READINESS GATES']);
  const cells = row!.split(/\s{2,}/);
  assert.deepEqual([cells[0], cells[1], cells[2], cells[3], cells[6]], ['runner', '1/1', 'Running', '0', 'node-t']);
  assert.match(cells[5]!, /^10\.244\.\d+\.\d+$/);
  assert.match(await ok(['get', 'namespace', 'tables']), /^NAME\s+STATUS\s+AGE\ntables\s+Active\s+\d+s\n$/);
  assert.match(await ok(['-n', 'tables', 'get', 'pods', '--show-labels']), /LABELS/);
});
