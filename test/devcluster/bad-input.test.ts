/**
 * Bad input over raw HTTPS: every mistake comes back as a Kubernetes Status with the right
 * code and reason, and the server keeps serving.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { rawRequest, startCluster, type DevCluster } from '../support/cluster.js';

let cluster: DevCluster;
before(async () => {
  cluster = await startCluster({ maxBodyBytes: 64 * 1024 });
});
after(() => cluster.close());

interface Reply {
  readonly code: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly json: Record<string, unknown>;
}

async function call(method: string, path: string, o: { token?: string | null; body?: string | Buffer; contentType?: string } = {}): Promise<Reply> {
  const r = await rawRequest(cluster, method, path, o);
  try {
    return { code: r.code, headers: r.headers, json: JSON.parse(r.text) as Record<string, unknown> };
  } catch (err) {
    throw new Error(`non-JSON reply ${r.code}: ${r.text.slice(0, 200)}`, { cause: err });
  }
}

function assertStatus(r: Reply, code: number, reason: string, message?: RegExp): void {
  assert.equal(r.code, code, JSON.stringify(r.json));
  assert.equal(r.json.kind, 'Status');
  assert.equal(r.json.apiVersion, 'v1');
  assert.equal(r.json.status, 'Failure');
  assert.equal(r.json.code, code);
  assert.equal(r.json.reason, reason);
  if (message) assert.match(String(r.json.message), message);
}

test('malformed JSON -> 400 BadRequest', async () => {
  const r = await call('POST', '/api/v1/namespaces', { body: '{"metadata": {"name": "x"', contentType: 'application/json' });
  assertStatus(r, 400, 'BadRequest', /cannot decode request body/);
});

test('a JSON value of the wrong shape -> 400', async () => {
  assertStatus(await call('POST', '/api/v1/namespaces', { body: '[1,2]', contentType: 'application/json' }), 400, 'BadRequest');
  assertStatus(await call('POST', '/api/v1/namespaces', { body: '{"metadata": "nope"}', contentType: 'application/json' }), 400, 'BadRequest');
  assertStatus(
    await call('POST', '/api/v1/namespaces', { body: '{"apiVersion":"apps/v1","kind":"Namespace","metadata":{"name":"a"}}', contentType: 'application/json' }),
    400,
    'BadRequest',
    /API version in the data \(apps\/v1\) does not match the expected API version \(v1\)/,
  );
});

test('unknown resources and paths -> 404 NotFound', async () => {
  assertStatus(await call('GET', '/api/v1/widgets'), 404, 'NotFound', /the server could not find the requested resource/);
  assertStatus(await call('GET', '/apis/example.com/v1/things'), 404, 'NotFound');
  assertStatus(await call('GET', '/api/v1/namespaces/default/pods/p/logs'), 404, 'NotFound');
  assertStatus(await call('GET', '/nonsense'), 404, 'NotFound');
  const missing = await call('GET', '/api/v1/namespaces/default/pods/nope');
  assertStatus(missing, 404, 'NotFound', /^pods "nope" not found$/);
  assert.deepEqual(missing.json.details, { name: 'nope', kind: 'pods' });
});

test('wrong content types -> 415 UnsupportedMediaType', async () => {
  assertStatus(await call('POST', '/api/v1/namespaces', { body: 'name: x', contentType: 'text/plain' }), 415, 'UnsupportedMediaType');
  assertStatus(await call('POST', '/api/v1/namespaces', { body: '{}' }), 415, 'UnsupportedMediaType');
  assertStatus(await call('PATCH', '/api/v1/namespaces/default', { body: '{}', contentType: 'application/json' }), 415, 'UnsupportedMediaType', /merge-patch/);
});

test('garbage protobuf -> 400, a protobuf kind we do not decode -> 415', async () => {
  assertStatus(await call('POST', '/api/v1/namespaces', { body: Buffer.from('not protobuf'), contentType: 'application/vnd.kubernetes.protobuf' }), 400, 'BadRequest');
  assertStatus(await call('POST', '/api/v1/namespaces', { body: Buffer.from([0x6b, 0x38, 0x73, 0, 0x0a, 0xff]), contentType: 'application/vnd.kubernetes.protobuf' }), 400, 'BadRequest');
  // Envelope {typeMeta{apiVersion:"v1", kind:"Pod"}} with an empty raw.
  const typeMeta = Buffer.concat([Buffer.from([0x0a, 2]), Buffer.from('v1'), Buffer.from([0x12, 3]), Buffer.from('Pod')]);
  const envelope = Buffer.concat([Buffer.from([0x6b, 0x38, 0x73, 0]), Buffer.from([0x0a, typeMeta.length]), typeMeta]);
  assertStatus(await call('POST', '/api/v1/namespaces/default/pods', { body: envelope, contentType: 'application/vnd.kubernetes.protobuf' }), 415, 'UnsupportedMediaType');
});

test('oversized bodies -> 413 RequestEntityTooLarge', async () => {
  const big = JSON.stringify({ metadata: { name: 'big' }, data: { blob: 'x'.repeat(100 * 1024) } });
  assertStatus(await call('POST', '/api/v1/namespaces/default/configmaps', { body: big, contentType: 'application/json' }), 413, 'RequestEntityTooLarge', /limit is 65536/);
});

test('missing and invalid tokens -> 401 Unauthorized; /version stays public', async () => {
  assertStatus(await call('GET', '/api/v1/pods', { token: null }), 401, 'Unauthorized');
  assertStatus(await call('GET', '/api/v1/pods', { token: 'garbage' }), 401, 'Unauthorized');
  assertStatus(await call('GET', '/api/v1/pods', { token: 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.AAAA' }), 401, 'Unauthorized');
  assertStatus(await call('GET', '/version', { token: 'garbage' }), 401, 'Unauthorized');
  const version = await call('GET', '/version', { token: null });
  assert.equal(version.code, 200);
  assert.equal(version.json.major, '1');
});

test('invalid objects -> 422 Invalid with causes; duplicates -> 409 AlreadyExists', async () => {
  const bad = await call('POST', '/api/v1/namespaces', { body: JSON.stringify({ metadata: { name: 'Not_Valid' } }), contentType: 'application/json' });
  assertStatus(bad, 422, 'Invalid', /^Namespace "Not_Valid" is invalid: metadata.name: Invalid value: "Not_Valid": a lowercase RFC 1123 label/);
  assert.equal((bad.json.details as { causes: Array<{ field: string }> }).causes[0]!.field, 'metadata.name');
  const noContainers = await call('POST', '/api/v1/namespaces/default/pods', { body: JSON.stringify({ metadata: { name: 'p' }, spec: {} }), contentType: 'application/json' });
  assertStatus(noContainers, 422, 'Invalid', /spec.containers: Required value/);
  const noName = await call('POST', '/api/v1/namespaces/default/configmaps', { body: JSON.stringify({ data: {} }), contentType: 'application/json' });
  assertStatus(noName, 422, 'Invalid', /name or generateName is required/);
  const body = JSON.stringify({ metadata: { name: 'dup' } });
  assert.equal((await call('POST', '/api/v1/namespaces/default/configmaps', { body, contentType: 'application/json' })).code, 201);
  assertStatus(await call('POST', '/api/v1/namespaces/default/configmaps', { body, contentType: 'application/json' }), 409, 'AlreadyExists', /^configmaps "dup" already exists$/);
  assertStatus(await call('POST', '/api/v1/namespaces/ghost/configmaps', { body, contentType: 'application/json' }), 404, 'NotFound', /^namespaces "ghost" not found$/);
});

test('stale updates and failed delete preconditions -> 409 Conflict', async () => {
  const created = await call('POST', '/api/v1/namespaces/default/configmaps', { body: JSON.stringify({ metadata: { name: 'cfg' }, data: { a: '1' } }), contentType: 'application/json' });
  const meta = created.json.metadata as { resourceVersion: string; uid: string };
  const first = await call('PUT', '/api/v1/namespaces/default/configmaps/cfg', { body: JSON.stringify({ metadata: { name: 'cfg', resourceVersion: meta.resourceVersion }, data: { a: '2' } }), contentType: 'application/json' });
  assert.equal(first.code, 200);
  const stale = await call('PUT', '/api/v1/namespaces/default/configmaps/cfg', { body: JSON.stringify({ metadata: { name: 'cfg', resourceVersion: meta.resourceVersion }, data: { a: '3' } }), contentType: 'application/json' });
  assertStatus(stale, 409, 'Conflict', /^Operation cannot be fulfilled on configmaps "cfg": the object has been modified; please apply your changes to the latest version and try again$/);
  const wrongUid = await call('DELETE', '/api/v1/namespaces/default/configmaps/cfg', { body: JSON.stringify({ preconditions: { uid: '00000000-0000-4000-8000-000000000000' } }), contentType: 'application/json' });
  assertStatus(wrongUid, 409, 'Conflict', /Precondition failed: UID in precondition/);
  const wrongRv = await call('DELETE', '/api/v1/namespaces/default/configmaps/cfg', { body: JSON.stringify({ preconditions: { resourceVersion: meta.resourceVersion } }), contentType: 'application/json' });
  assertStatus(wrongRv, 409, 'Conflict', /Precondition failed: ResourceVersion in precondition/);
  const okDelete = await call('DELETE', '/api/v1/namespaces/default/configmaps/cfg', { body: JSON.stringify({ preconditions: { uid: meta.uid } }), contentType: 'application/json' });
  assert.equal(okDelete.code, 200);
  assert.equal(okDelete.json.status, 'Success');
});

test('bad selectors and patches -> 400/422', async () => {
  assertStatus(await call('GET', '/api/v1/pods?labelSelector=' + encodeURIComponent('app in (a')), 400, 'BadRequest');
  assertStatus(await call('GET', '/api/v1/pods?fieldSelector=spec.bogus%3Dx'), 400, 'BadRequest', /field label not supported: spec.bogus/);
  assertStatus(await call('GET', '/api/v1/pods?watch=1&resourceVersion=abc'), 400, 'BadRequest');
  assertStatus(await call('PATCH', '/api/v1/namespaces/default', { body: '{"op":"add"}', contentType: 'application/json-patch+json' }), 400, 'BadRequest');
  assertStatus(await call('PATCH', '/api/v1/namespaces/default', { body: '[{"op":"remove","path":"/metadata/nothing"}]', contentType: 'application/json-patch+json' }), 422, 'Invalid');
  assertStatus(await call('PATCH', '/api/v1/namespaces/default', { body: '[1]', contentType: 'application/merge-patch+json' }), 400, 'BadRequest');
  assertStatus(await call('PUT', '/apis/authentication.k8s.io/v1/tokenreviews', { body: '{}', contentType: 'application/json' }), 405, 'MethodNotAllowed');
  assertStatus(await call('GET', '/api/v1/namespaces/%E0%A4%A/pods'), 400, 'BadRequest');
  const badContinue = Buffer.from(JSON.stringify({ rv: 1e9, start: -3 })).toString('base64url');
  assertStatus(await call('GET', `/api/v1/namespaces?limit=1&continue=${badContinue}`), 400, 'BadRequest');
  assertStatus(await call('GET', '/api/v1/namespaces?limit=1&continue=%21%21'), 400, 'BadRequest');
  assertStatus(await call('POST', '/devcluster/faults', { body: 'null', contentType: 'application/json' }), 400, 'BadRequest');
});

test('the server is still healthy after all of the above', async () => {
  const r = await call('GET', '/api/v1/namespaces/default');
  assert.equal(r.code, 200);
  assert.equal((r.json.status as { phase: string }).phase, 'Active');
});

test('leases as kube-apiserver stores them: stale or missing resourceVersion on update, MicroTime layout, spec bounds', async () => {
  const path = '/apis/coordination.k8s.io/v1/namespaces/default/leases';
  const json = 'application/json';
  const spec = { holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: '2026-01-01T00:00:00.000000Z', renewTime: '2026-01-01T00:00:00.000000Z', leaseTransitions: 0 };
  const created = await call('POST', path, { body: JSON.stringify({ metadata: { name: 'l' }, spec }), contentType: json });
  assert.equal(created.code, 201, JSON.stringify(created.json));
  const rv = (created.json.metadata as { resourceVersion: string }).resourceVersion;
  // The Lease strategy allows no unconditional update.
  const noRv = await call('PUT', `${path}/l`, { body: JSON.stringify({ metadata: { name: 'l' }, spec: { ...spec, holderIdentity: 'b' } }), contentType: json });
  assertStatus(noRv, 422, 'Invalid', /^leases.coordination.k8s.io "l" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update$/);
  const renewed = await call('PUT', `${path}/l`, { body: JSON.stringify({ metadata: { name: 'l', resourceVersion: rv }, spec: { ...spec, renewTime: '2026-01-01T00:00:02.000000Z' } }), contentType: json });
  assert.equal(renewed.code, 200);
  const stale = await call('PUT', `${path}/l`, { body: JSON.stringify({ metadata: { name: 'l', resourceVersion: rv }, spec: { ...spec, holderIdentity: 'b' } }), contentType: json });
  assertStatus(stale, 409, 'Conflict', /^Operation cannot be fulfilled on leases.coordination.k8s.io "l": the object has been modified/);
  // A merge patch applies onto the stored object, resourceVersion included: no precondition needed.
  const patched = await call('PATCH', `${path}/l`, { body: JSON.stringify({ metadata: { labels: { x: 'y' } } }), contentType: 'application/merge-patch+json' });
  assert.equal(patched.code, 200);
  // metav1.MicroTime decodes only RFC 3339 with six fraction digits (a JS Date's three is refused).
  const millis = await call('POST', path, { body: JSON.stringify({ metadata: { name: 'm' }, spec: { ...spec, renewTime: '2026-01-01T00:00:00.000Z' } }), contentType: json });
  assertStatus(millis, 400, 'BadRequest', /parsing time "2026-01-01T00:00:00.000Z"/);
  const bounds = await call('POST', path, { body: JSON.stringify({ metadata: { name: 'n' }, spec: { ...spec, leaseDurationSeconds: 0, leaseTransitions: -1 } }), contentType: json });
  assertStatus(bounds, 422, 'Invalid', /spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0, spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0/);
});
