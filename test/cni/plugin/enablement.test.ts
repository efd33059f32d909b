import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isAmbientPod, decodeEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from '../../../src/cni/plugin/enablement.js';
import { selectorMatches } from '../../../src/core/label-selector.js';

const pod = (over: Partial<Parameters<typeof isAmbientPod>[0]> = {}) => ({
  podLabels: {},
  podAnnotations: {},
  hostNetwork: false,
  namespaceLabels: {},
  ...over,
});
const MODE = 'istio.io/dataplane-mode';

test('default selectors: pod label ambient, or namespace label ambient unless the pod says none', () => {
  const s = DEFAULT_ENABLEMENT_SELECTORS;
  assert.equal(isAmbientPod(pod({ podLabels: { [MODE]: 'ambient' } }), s), true);
  assert.equal(isAmbientPod(pod({ namespaceLabels: { [MODE]: 'ambient' } }), s), true);
  assert.equal(isAmbientPod(pod({ namespaceLabels: { [MODE]: 'ambient' }, podLabels: { [MODE]: 'none' } }), s), false);
  assert.equal(isAmbientPod(pod(), s), false);
  assert.equal(isAmbientPod(pod({ namespaceLabels: { [MODE]: 'none' } }), s), false);
});

test('host-network pods and pods with a sidecar are never ambient', () => {
  const s = DEFAULT_ENABLEMENT_SELECTORS;
  assert.equal(isAmbientPod(pod({ podLabels: { [MODE]: 'ambient' }, hostNetwork: true }), s), false);
  assert.equal(
    isAmbientPod(pod({ namespaceLabels: { [MODE]: 'ambient' }, podAnnotations: { 'sidecar.istio.io/status': '{}' } }), s),
    false,
  );
});

test('configured selectors replace the defaults; operators behave as Kubernetes label selectors', () => {
  const s = decodeEnablementSelectors([
    { podSelector: { matchExpressions: [{ key: 'team', operator: 'In', values: ['a', 'b'] }, { key: 'canary', operator: 'DoesNotExist' }] } },
  ]);
  assert.equal(isAmbientPod(pod({ podLabels: { team: 'a' } }), s), true);
  assert.equal(isAmbientPod(pod({ podLabels: { team: 'a', canary: '' } }), s), false);
  assert.equal(isAmbientPod(pod({ podLabels: { [MODE]: 'ambient' } }), s), false);
  assert.equal(selectorMatches({ matchLabels: {}, matchExpressions: [{ key: 'x', operator: 'Exists', values: [] }] }, { x: '' }), true);
  assert.equal(decodeEnablementSelectors([]), DEFAULT_ENABLEMENT_SELECTORS);
  assert.equal(decodeEnablementSelectors(null), DEFAULT_ENABLEMENT_SELECTORS);
  assert.throws(() => decodeEnablementSelectors([{ podSelector: { matchExpressions: [{ key: 'k', operator: 'In', values: [] }] } }]));
});
