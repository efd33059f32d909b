import { test } from 'node:test';
import assert from 'node:assert/strict';
import { daemonSetTargetsNode, decideOnShutdown, FightDetector } from '../../../src/cni/install/index.js';

const NODE = { name: 'node-a', labels: { 'kubernetes.io/os': 'linux', pool: 'blue', cores: '8' } };

test('no DaemonSet, or one being deleted -> uninstall', () => {
  assert.equal(decideOnShutdown({ daemonSetName: 'ds', daemonSet: undefined, node: NODE }).action, 'uninstall');
  assert.equal(decideOnShutdown({ daemonSetName: 'ds', daemonSet: { deletionTimestamp: '2026-01-01T00:00:00Z' }, node: NODE }).action, 'uninstall');
});

test('DaemonSet present and still selecting the node -> keep (upgrade)', () => {
  assert.equal(decideOnShutdown({ daemonSetName: 'ds', daemonSet: {}, node: NODE }).action, 'keep');
  assert.equal(decideOnShutdown({ daemonSetName: 'ds', daemonSet: { nodeSelector: { pool: 'blue' } }, node: NODE }).action, 'keep');
});

test('DaemonSet no longer selecting the node -> uninstall', () => {
  const d = decideOnShutdown({ daemonSetName: 'ds', daemonSet: { nodeSelector: { pool: 'green' } }, node: NODE });
  assert.equal(d.action, 'uninstall');
  assert.match(d.reason, /no longer targets node node-a/);
});

test('node unreadable -> keep (the safe side)', () => {
  assert.equal(decideOnShutdown({ daemonSetName: 'ds', daemonSet: { nodeSelector: { pool: 'green' } }, node: undefined }).action, 'keep');
});

test('required node affinity: terms ORed, requirements ANDed, all operators', () => {
  const term = (...matchExpressions: Array<{ key: string; operator: string; values?: string[] }>) => ({ matchExpressions });
  const targets = (...terms: ReturnType<typeof term>[]) => daemonSetTargetsNode({ requiredNodeSelectorTerms: terms }, NODE);
  assert.ok(targets(term({ key: 'pool', operator: 'In', values: ['blue', 'red'] })));
  assert.ok(!targets(term({ key: 'pool', operator: 'In', values: ['red'] })));
  assert.ok(targets(term({ key: 'pool', operator: 'NotIn', values: ['red'] })));
  assert.ok(targets(term({ key: 'zone', operator: 'NotIn', values: ['x'] })));
  assert.ok(targets(term({ key: 'pool', operator: 'Exists' })));
  assert.ok(!targets(term({ key: 'zone', operator: 'Exists' })));
  assert.ok(targets(term({ key: 'zone', operator: 'DoesNotExist' })));
  assert.ok(targets(term({ key: 'cores', operator: 'Gt', values: ['4'] })));
  assert.ok(!targets(term({ key: 'cores', operator: 'Lt', values: ['4'] })));
  assert.ok(!targets(term({ key: 'pool', operator: 'Gt', values: ['4'] })));
  assert.ok(!targets(term({ key: 'pool', operator: 'Bogus' })));
  assert.ok(!targets(term({ key: 'pool', operator: 'In', values: ['blue'] }, { key: 'zone', operator: 'Exists' })));
  assert.ok(targets(term({ key: 'zone', operator: 'Exists' }), term({ key: 'pool', operator: 'In', values: ['blue'] })));
  assert.ok(!targets({ matchExpressions: [] }), 'an empty term matches nothing');
  assert.ok(daemonSetTargetsNode({ requiredNodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: ['node-a'] }] }] }, NODE));
  assert.ok(!daemonSetTargetsNode({ requiredNodeSelectorTerms: [{ matchFields: [{ key: 'metadata.name', operator: 'NotIn', values: ['node-a'] }] }] }, NODE));
});

test('fight detector: warns from the threshold on, forgets repairs outside the window', () => {
  let now = 0;
  const d = new FightDetector({ windowMs: 1000, threshold: 3, now: () => now });
  assert.equal(d.record('config'), undefined);
  now = 100;
  assert.equal(d.record('config'), undefined);
  assert.equal(d.record('binary'), undefined, 'objects are counted separately');
  now = 200;
  assert.equal(d.record('config'), 3);
  now = 1150; // the first two fell out of the window
  assert.equal(d.record('config'), undefined);
});
