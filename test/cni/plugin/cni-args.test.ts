import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCniArgs } from '../../../src/cni/plugin/cni-args.js';
import { CniError } from '../../../src/cni/plugin/cni-error.js';

test('parses the Kubernetes keys a container runtime passes', () => {
  const a = parseCniArgs(
    'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-7d9f;K8S_POD_INFRA_CONTAINER_ID=0123abc;K8S_POD_UID=9f1c-22',
  );
  assert.deepEqual(a, { podName: 'cart-7d9f', podNamespace: 'shop', podUid: '9f1c-22', infraContainerId: '0123abc' });
});

test('empty or absent CNI_ARGS gives empty values', () => {
  assert.deepEqual(parseCniArgs(undefined), { podName: '', podNamespace: '', podUid: '', infraContainerId: '' });
  assert.equal(parseCniArgs('').podName, '');
});

test('unknown keys are refused unless IgnoreUnknown is true', () => {
  assert.throws(() => parseCniArgs('K8S_POD_NAME=a;FOO=bar'), (e: unknown) => e instanceof CniError && e.code === 'ERR_CNI_INVALID_ENV');
  assert.equal(parseCniArgs('IgnoreUnknown=true;K8S_POD_NAME=a;FOO=bar').podName, 'a');
  assert.throws(() => parseCniArgs('IgnoreUnknown=0;FOO=bar'), (e: unknown) => e instanceof CniError && e.wireCode === 4);
});

test('malformed pairs are refused with code 4', () => {
  for (const bad of ['K8S_POD_NAME', 'K8S_POD_NAME=a=b', '=x', 'IgnoreUnknown=maybe']) {
    assert.throws(() => parseCniArgs(bad), (e: unknown) => e instanceof CniError && e.wireCode === 4, bad);
  }
});
