/**
 * Kubernetes label-selector semantics, once for the shared matcher and again through each part
 * that uses it: the CNI plugin's enablement selectors (decoded from the plugin config), the
 * devcluster's `labelSelector` string, and install-cni's DaemonSet node scheduling.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { requirementMatches, selectorMatches, type LabelSelector, type Labels } from '../../src/core/label-selector.js';
import { decodeEnablementSelectors, isAmbientPod } from '../../src/cni/plugin/enablement.js';
import { matchesLabels, parseLabelSelector } from '../../src/devcluster/selectors.js';
import { daemonSetTargetsNode } from '../../src/cni/install/upgrade-policy.js';

interface Case {
  readonly what: string;
  readonly selector: LabelSelector;
  readonly labels: Labels;
  readonly matches: boolean;
}

const web = { app: 'web', tier: 'front', canary: '' };
const cases: Case[] = [
  { what: 'empty selector, some labels', selector: {}, labels: web, matches: true },
  { what: 'empty selector, no labels', selector: { matchLabels: {}, matchExpressions: [] }, labels: {}, matches: true },
  { what: 'In: value listed', selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['db', 'web'] }] }, labels: web, matches: true },
  { what: 'In: value not listed', selector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['db'] }] }, labels: web, matches: false },
  { what: 'In: key absent', selector: { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }, labels: web, matches: false },
  { what: 'In: empty value listed', selector: { matchExpressions: [{ key: 'canary', operator: 'In', values: [''] }] }, labels: web, matches: true },
  { what: 'NotIn: value listed', selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['front'] }] }, labels: web, matches: false },
  { what: 'NotIn: value not listed', selector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['back'] }] }, labels: web, matches: true },
  { what: 'NotIn: key absent', selector: { matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, labels: web, matches: true },
  { what: 'Exists: empty value is present', selector: { matchExpressions: [{ key: 'canary', operator: 'Exists', values: [] }] }, labels: web, matches: true },
  { what: 'Exists: key absent', selector: { matchExpressions: [{ key: 'zone', operator: 'Exists', values: [] }] }, labels: web, matches: false },
  { what: 'DoesNotExist: key absent', selector: { matchExpressions: [{ key: 'zone', operator: 'DoesNotExist', values: [] }] }, labels: web, matches: true },
  { what: 'DoesNotExist: empty value is present', selector: { matchExpressions: [{ key: 'canary', operator: 'DoesNotExist', values: [] }] }, labels: web, matches: false },
  { what: 'matchLabels: equal', selector: { matchLabels: { app: 'web', tier: 'front' } }, labels: web, matches: true },
  { what: 'matchLabels: one differs', selector: { matchLabels: { app: 'web', tier: 'back' } }, labels: web, matches: false },
  { what: 'matchLabels: key named like an Object member, absent', selector: { matchLabels: { constructor: 'x' } }, labels: web, matches: false },
  {
    what: 'matchLabels and matchExpressions both hold',
    selector: { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['front'] }, { key: 'zone', operator: 'DoesNotExist', values: [] }] },
    labels: web,
    matches: true,
  },
  {
    what: 'matchLabels holds, an expression does not',
    selector: { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['front'] }] },
    labels: web,
    matches: false,
  },
  {
    what: 'expressions hold, matchLabels does not',
    selector: { matchLabels: { app: 'db' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['front'] }] },
    labels: web,
    matches: false,
  },
];

test('the shared matcher: In, NotIn, Exists, DoesNotExist, matchLabels with matchExpressions, the empty selector', () => {
  for (const c of cases) assert.equal(selectorMatches(c.selector, c.labels), c.matches, c.what);
  assert.equal(selectorMatches({}, undefined), true, 'no labels at all');
  assert.equal(selectorMatches({ matchExpressions: [{ key: 'a', operator: 'NotIn', values: ['x'] }] }, undefined), true);
  assert.equal(requirementMatches({ key: 'a', operator: 'Exists', values: [] }, {}), false);
});

test('the CNI plugin\'s enablement selectors decoded from its config match the same way', () => {
  for (const c of cases) {
    const selectors = decodeEnablementSelectors([{ podSelector: JSON.parse(JSON.stringify(c.selector)) as unknown }]);
    const pod = { podLabels: c.labels, podAnnotations: {}, hostNetwork: false, namespaceLabels: {} };
    assert.equal(isAmbientPod(pod, selectors), c.matches, c.what);
  }
});

/** The same selector in the query-string form the API server parses. */
function asQuery(s: LabelSelector): string {
  const parts = Object.entries(s.matchLabels ?? {}).map(([k, v]) => `${k}=${v}`);
  for (const r of s.matchExpressions ?? []) {
    if (r.operator === 'In' || r.operator === 'NotIn') parts.push(`${r.key} ${r.operator.toLowerCase()} (${r.values.join(',')})`);
    else parts.push(r.operator === 'Exists' ? r.key : `!${r.key}`);
  }
  return parts.join(',');
}

test('the devcluster\'s labelSelector query matches the same way (a=b is In, a!=b NotIn)', () => {
  for (const c of cases) {
    // An empty value cannot be written inside `in ( )`; that case is the matcher's alone.
    if (c.selector.matchExpressions?.some((r) => r.values.includes(''))) continue;
    assert.equal(matchesLabels(parseLabelSelector(asQuery(c.selector)), c.labels), c.matches, `${c.what}: ${asQuery(c.selector)}`);
  }
  assert.equal(matchesLabels(parseLabelSelector('canary='), web), true, 'a=<empty> needs the key with the empty value');
  assert.equal(matchesLabels(parseLabelSelector('zone!=a'), web), true, 'a!=b holds when the key is absent');
});

test('install-cni reads a DaemonSet\'s nodeSelector and node affinity expressions the same way', () => {
  for (const c of cases) {
    const exprs = c.selector.matchExpressions ?? [];
    const ds = { nodeSelector: c.selector.matchLabels, requiredNodeSelectorTerms: exprs.length > 0 ? [{ matchExpressions: exprs }] : [] };
    assert.equal(daemonSetTargetsNode(ds, { name: 'node-a', labels: c.labels }), c.matches, c.what);
  }
});
