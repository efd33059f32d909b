/** Pure pieces of the devcluster: selector parsing and matching, the three patch formats, RBAC rule matching, age printing. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseLabelSelector, matchesLabels, parseFieldSelector, matchesFields } from '../../src/devcluster/selectors.js';
import { mergePatch, strategicMergePatch, jsonPatch } from '../../src/devcluster/patch.js';
import { ruleAllows, forbiddenMessage } from '../../src/devcluster/rbac.js';
import { humanAge } from '../../src/devcluster/tables.js';
import { ApiError } from '../../src/devcluster/status.js';

const user = { username: 'system:serviceaccount:ns:sa', groups: ['system:authenticated'] };

test('label selectors: equality, sets, existence', () => {
  const labels = { app: 'web', tier: 'front' };
  const yes = ['app=web', 'app==web', 'app!=db', 'app in (web,db)', 'tier notin (back)', 'app', '!missing', 'app=web, tier=front', ''];
  const no = ['app=db', 'app!=web', 'app in (db)', 'tier notin (front)', 'missing', '!app', 'app=web,tier=back'];
  for (const s of yes) assert.equal(matchesLabels(parseLabelSelector(s), labels), true, s);
  for (const s of no) assert.equal(matchesLabels(parseLabelSelector(s), labels), false, s);
  for (const bad of ['app in (web', 'a=b=c', '=x', 'app in web']) {
    assert.throws(() => parseLabelSelector(bad), (e: unknown) => e instanceof ApiError && e.code === 'ERR_DEVCLUSTER_BAD_REQUEST', bad);
  }
});

test('field selectors: indexed fields only, = == !=, booleans as text', () => {
  const pod = { metadata: { name: 'p', namespace: 'n' }, spec: { nodeName: 'a', serviceAccountName: 'sa' }, status: { phase: 'Running' } };
  const fields = ['spec.nodeName', 'status.phase', 'spec.serviceAccountName', 'spec.hostNetwork'];
  assert.equal(matchesFields(parseFieldSelector('spec.nodeName=a,status.phase!=Failed', fields), pod), true);
  assert.equal(matchesFields(parseFieldSelector('metadata.name==p,metadata.namespace=n', fields), pod), true);
  assert.equal(matchesFields(parseFieldSelector('spec.hostNetwork=false', fields), pod), true);
  assert.equal(matchesFields(parseFieldSelector('spec.nodeName=b', fields), pod), false);
  assert.throws(() => parseFieldSelector('spec.other=x', fields), (e: unknown) => e instanceof ApiError && /field label not supported/.test(e.message));
  assert.throws(() => parseFieldSelector('nonsense', fields), (e: unknown) => e instanceof ApiError && e.httpCode === 400);
});

test('merge patch (RFC 7386) and strategic merge by key', () => {
  assert.deepEqual(mergePatch({ a: 1, b: { c: 2, d: 3 }, l: [1, 2] }, { b: { c: null, e: 4 }, l: [3] }), { a: 1, b: { d: 3, e: 4 }, l: [3] });
  const pod = { spec: { containers: [{ name: 'a', image: 'x' }, { name: 'b', image: 'y' }] }, status: { conditions: [{ type: 'Ready', status: 'False' }] }, metadata: { finalizers: ['f1'] } };
  const out = strategicMergePatch(pod, {
    spec: { containers: [{ name: 'b', image: 'z' }, { name: 'c', image: 'w' }] },
    status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'Initialized', status: 'True' }] },
    metadata: { finalizers: ['f2'] },
  }) as typeof pod;
  assert.deepEqual(out.spec.containers, [{ name: 'a', image: 'x' }, { name: 'b', image: 'z' }, { name: 'c', image: 'w' }]);
  assert.deepEqual(out.status.conditions, [{ type: 'Ready', status: 'True' }, { type: 'Initialized', status: 'True' }]);
  assert.deepEqual(out.metadata.finalizers, ['f1', 'f2']);
  const deleted = strategicMergePatch(pod, { spec: { containers: [{ name: 'a', $patch: 'delete' }] } }) as typeof pod;
  assert.deepEqual(deleted.spec.containers, [{ name: 'b', image: 'y' }]);
  const replaced = strategicMergePatch(pod, { spec: { $patch: 'replace', containers: [{ name: 'only', image: 'i' }] } }) as typeof pod;
  assert.deepEqual(replaced.spec, { containers: [{ name: 'only', image: 'i' }] });
});

test('JSON patch (RFC 6902): add, replace, remove, move, copy, test', () => {
  const doc = { metadata: { labels: { a: '1' } }, list: [1, 2] };
  const out = jsonPatch(doc, [
    { op: 'add', path: '/metadata/labels/b~1c', value: '2' },
    { op: 'replace', path: '/metadata/labels/a', value: 'x' },
    { op: 'add', path: '/list/-', value: 3 },
    { op: 'remove', path: '/list/0' },
    { op: 'copy', from: '/list/0', path: '/first' },
    { op: 'move', from: '/first', path: '/moved' },
    { op: 'test', path: '/moved', value: 2 },
  ]);
  assert.deepEqual(out, { metadata: { labels: { a: 'x', 'b/c': '2' } }, list: [2, 3], moved: 2 });
  assert.deepEqual(doc, { metadata: { labels: { a: '1' } }, list: [1, 2] }, 'input untouched');
  assert.throws(() => jsonPatch(doc, [{ op: 'test', path: '/list/0', value: 9 }]), (e: unknown) => e instanceof ApiError && e.httpCode === 422);
  assert.throws(() => jsonPatch(doc, [{ op: 'replace', path: '/nope', value: 1 }]), (e: unknown) => e instanceof ApiError && e.httpCode === 422);
  assert.throws(() => jsonPatch(doc, { op: 'add' }), (e: unknown) => e instanceof ApiError && e.httpCode === 400);
  assert.throws(() => jsonPatch(doc, [{ op: 'frobnicate', path: '/a' }]), (e: unknown) => e instanceof ApiError && e.httpCode === 400);
});

test('RBAC rules: verbs, groups, subresources, resourceNames, wildcards, non-resource URLs', () => {
  const attrs = { user, resourceRequest: true, verb: 'create', apiGroup: '', resource: 'serviceaccounts', subresource: 'token', name: 'ztunnel', namespace: 'istio-system' };
  assert.equal(ruleAllows({ verbs: ['create'], apiGroups: [''], resources: ['serviceaccounts/token'], resourceNames: ['ztunnel'] }, attrs), true);
  assert.equal(ruleAllows({ verbs: ['create'], apiGroups: [''], resources: ['serviceaccounts/token'], resourceNames: ['other'] }, attrs), false);
  assert.equal(ruleAllows({ verbs: ['create'], apiGroups: [''], resources: ['serviceaccounts'] }, attrs), false, 'the parent resource does not grant the subresource');
  assert.equal(ruleAllows({ verbs: ['*'], apiGroups: ['*'], resources: ['*/token'] }, attrs), true);
  assert.equal(ruleAllows({ verbs: ['get'], apiGroups: [''], resources: ['*'] }, attrs), false);
  assert.equal(ruleAllows({ verbs: ['list'], apiGroups: [''], resources: ['pods'], resourceNames: ['p'] }, { user, resourceRequest: true, verb: 'list', apiGroup: '', resource: 'pods' }), false, 'resourceNames never allow an unnamed list');
  assert.equal(ruleAllows({ verbs: ['get'], nonResourceURLs: ['/apis/*'] }, { user, resourceRequest: false, verb: 'get', path: '/apis/apps/v1' }), true);
  assert.equal(ruleAllows({ verbs: ['get'], nonResourceURLs: ['/api'] }, { user, resourceRequest: false, verb: 'get', path: '/apis' }), false);
  assert.equal(
    forbiddenMessage({ user, resourceRequest: true, verb: 'get', apiGroup: 'apps', resource: 'daemonsets', name: 'ds', namespace: 'kube-system' }),
    'daemonsets.apps "ds" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "daemonsets" in API group "apps" in the namespace "kube-system"',
  );
  assert.equal(
    forbiddenMessage(attrs),
    'serviceaccounts "ztunnel" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "serviceaccounts/token" in API group "" in the namespace "istio-system"',
  );
});

test('ages print as kubectl prints them', () => {
  const s = 1000;
  assert.deepEqual([5 * s, 119 * s, 200 * s, 15 * 60 * s, 5 * 3600 * s + 12 * 60 * s, 36 * 3600 * s, 3 * 86400 * s + 4 * 3600 * s, 120 * 86400 * s, 800 * 86400 * s].map(humanAge), ['5s', '119s', '3m20s', '15m', '5h12m', '36h', '3d4h', '120d', '2y']);
});
