/**
 * Seeded random requests (methods, paths, content types, bodies: garbage bytes, random JSON,
 * truncated protobuf) against every kind of endpoint. Nothing may produce a 500 (that would be
 * an unexpected exception) and every failure must be a Status; the server must keep serving.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent } from 'node:https';
import { rawRequest, startCluster, type DevCluster } from '../support/cluster.js';
import { seededRng } from '../support/seeded-rng.js';

let cluster: DevCluster;
let agent: Agent;
before(async () => {
  cluster = await startCluster({ maxBodyBytes: 16 * 1024 });
  agent = new Agent({ keepAlive: true, ca: cluster.caCertPem });
});
after(async () => {
  agent.destroy();
  await cluster.close();
});

const PATHS = [
  '/api/v1/namespaces', '/api/v1/namespaces/default', '/api/v1/namespaces/default/pods', '/api/v1/namespaces/default/pods/p',
  '/api/v1/namespaces/default/pods/p/status', '/api/v1/namespaces/default/serviceaccounts/default/token', '/api/v1/nodes/n',
  '/apis/authentication.k8s.io/v1/tokenreviews', '/apis/authorization.k8s.io/v1/subjectaccessreviews',
  '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', '/apis/authorization.k8s.io/v1/selfsubjectrulesreviews',
  '/apis/rbac.authorization.k8s.io/v1/clusterroles', '/apis/certificates.k8s.io/v1/certificatesigningrequests/c/approval',
  '/api/v1/namespaces/default/configmaps/c', '/devcluster/faults', '/api/v1/pods?labelSelector=a%20in%20(', '/api/v1/pods?fieldSelector=x',
];
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const TYPES = ['application/json', 'application/yaml', 'application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/json-patch+json', 'application/apply-patch+yaml', 'application/vnd.kubernetes.protobuf', 'text/plain', ''];

function randomJson(r: () => number, depth = 0): unknown {
  const k = Math.floor(r() * (depth > 3 ? 4 : 7));
  switch (k) {
    case 0: return null;
    case 1: return r() < 0.5;
    case 2: return Math.floor(r() * 2000) - 1000;
    case 3: return ['p', 'default', 'Pod', 'v1', '', 'a/b', '✓', 'x'.repeat(70)][Math.floor(r() * 8)];
    case 4: return Array.from({ length: Math.floor(r() * 4) }, () => randomJson(r, depth + 1));
    default: {
      const keys = ['apiVersion', 'kind', 'metadata', 'name', 'namespace', 'labels', 'spec', 'status', 'containers', 'token', 'audiences', 'resourceAttributes', 'op', 'path', 'value', 'expirationSeconds', 'boundObjectRef', 'preconditions', 'latencyMs', 'fail429'];
      const o: Record<string, unknown> = {};
      for (let i = 0; i < Math.floor(r() * 5); i++) o[keys[Math.floor(r() * keys.length)]!] = randomJson(r, depth + 1);
      return o;
    }
  }
}

function randomBody(r: () => number): Buffer {
  const k = r();
  if (k < 0.2) return Buffer.from(Array.from({ length: Math.floor(r() * 64) }, () => Math.floor(r() * 256)));
  if (k < 0.3) return Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0]), Buffer.from(Array.from({ length: Math.floor(r() * 32) }, () => Math.floor(r() * 256)))]);
  const text = JSON.stringify(randomJson(r));
  return Buffer.from(k < 0.4 ? text.slice(0, Math.floor(text.length / 2)) : text);
}

async function call(method: string, path: string, body: Buffer | undefined, contentType: string): Promise<{ code: number; text: string }> {
  const r = await rawRequest(cluster, method, path, { agent, contentType, ...(body ? { body } : {}) });
  return { code: r.code, text: r.text };
}

test('400 seeded random requests: no 500s, every failure a Status, server still serving', async () => {
  const r = seededRng(20261129);
  const codes = new Map<number, number>();
  for (let i = 0; i < 400; i++) {
    const method = METHODS[Math.floor(r() * METHODS.length)]!;
    const path = PATHS[Math.floor(r() * PATHS.length)]!;
    const type = TYPES[Math.floor(r() * TYPES.length)]!;
    const body = method === 'GET' ? undefined : randomBody(r);
    const res = await call(method, path, body, type);
    codes.set(res.code, (codes.get(res.code) ?? 0) + 1);
    // A random body may have armed latency or failures on the fault endpoint: disarm them.
    if (path === '/devcluster/faults') cluster.faults.clear();
    assert.notEqual(res.code, 500, `#${i} ${method} ${path} (${type}) ${body?.toString('hex').slice(0, 80)} -> ${res.text}`);
    if (res.code >= 400) {
      const status = JSON.parse(res.text) as { kind?: string; code?: number; reason?: string };
      assert.equal(status.kind, 'Status', res.text);
      assert.equal(status.code, res.code);
      assert.equal(typeof status.reason, 'string');
    }
  }
  assert.ok((codes.get(400) ?? 0) > 0 && [...codes.keys()].some((c) => c < 300), `a mix of outcomes: ${JSON.stringify([...codes])}`);
  const health = await call('GET', '/api/v1/namespaces', undefined, '');
  assert.equal(health.code, 200);
});
