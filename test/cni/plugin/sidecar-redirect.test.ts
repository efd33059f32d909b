import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podFromObject } from '../../../src/cni/plugin/kube-client.js';
import { sidecarDecision, redirectSettings } from '../../../src/cni/plugin/sidecar-redirect.js';
import { sidecarPlan } from '../../../src/cni/plugin/sidecar-programmer.js';
import { CniError } from '../../../src/cni/plugin/cni-error.js';
import { casePod, goldenText, loadCniCases } from './conformance-cases.js';

for (const [name, c] of Object.entries(loadCniCases())) {
  test(`istio-cni-plugin case ${name}: pod -> settings -> rules match the golden`, () => {
    const decision = sidecarDecision(podFromObject(casePod('test-pod', 'test-ns', c)));
    assert.ok(decision.redirect, 'a sidecar pod gets redirection');
    if (!decision.redirect) return;
    const plan = sidecarPlan(decision.settings, false);
    assert.equal(plan.v4, goldenText(c));
    assert.equal(plan.v6, '');
  });
}

const base = (over: Record<string, unknown> = {}) =>
  podFromObject({
    metadata: { name: 'p', namespace: 'n', annotations: { 'sidecar.istio.io/status': '{}' }, ...over },
    spec: { containers: [{ name: 'app' }, { name: 'istio-proxy' }] },
  });

test('pods without the sidecar markers get no redirection, each with its reason', () => {
  assert.equal(sidecarDecision(base({ annotations: {} })).redirect, false);
  const noProxy = podFromObject({ metadata: { annotations: { 'sidecar.istio.io/status': '{}' } }, spec: { containers: [{ name: 'app' }] } });
  assert.deepEqual(sidecarDecision(noProxy), { redirect: false, reason: 'no istio-proxy container' });
  const withInit = podFromObject({
    metadata: { annotations: { 'sidecar.istio.io/status': '{}' } },
    spec: { initContainers: [{ name: 'istio-init' }], containers: [{ name: 'istio-proxy' }] },
  });
  assert.deepEqual(sidecarDecision(withInit), { redirect: false, reason: 'pod has an istio-init container' });
  const injectOff = base({ labels: { 'sidecar.istio.io/inject': 'false' } });
  assert.deepEqual(sidecarDecision(injectOff), { redirect: false, reason: 'injection disabled' });
  const gateway = podFromObject({
    metadata: { annotations: { 'sidecar.istio.io/status': '{}' } },
    spec: { containers: [{ name: 'istio-proxy', args: ['proxy', 'router'] }] },
  });
  assert.deepEqual(sidecarDecision(gateway), { redirect: false, reason: 'proxy type router' });
  const disabled = podFromObject({
    metadata: { annotations: { 'sidecar.istio.io/status': '{}' } },
    spec: { containers: [{ name: 'istio-proxy', env: [{ name: 'DISABLE_ENVOY', value: 'true' }] }] },
  });
  assert.equal(sidecarDecision(disabled).redirect, false);
});

test('exclude inbound ports always gain 15020,15021,15090, deduplicated', () => {
  const s = redirectSettings({ 'traffic.sidecar.istio.io/excludeInboundPorts': '15021,8080' }, undefined);
  assert.equal(s.inboundPortsExclude, '15021,8080,15020,15090');
  assert.equal(redirectSettings({}, undefined).inboundPortsExclude, '15020,15021,15090');
});

test('invalid annotations are refused with code 102, naming each one', () => {
  try {
    redirectSettings(
      {
        'sidecar.istio.io/interceptionMode': 'MAGIC',
        'traffic.sidecar.istio.io/includeOutboundIPRanges': '10.0.0.0/33',
        'traffic.sidecar.istio.io/excludeInboundPorts': '70000',
      },
      undefined,
    );
    assert.fail('expected an error');
  } catch (err) {
    assert.ok(err instanceof CniError);
    assert.equal(err.wireCode, 102);
    assert.match(err.message, /interceptionMode/);
    assert.match(err.message, /includeOutboundIPRanges/);
    assert.match(err.message, /excludeInboundPorts/);
  }
});
