import { test } from 'node:test';
import assert from 'node:assert/strict';
import { brokenPodReason, DEFAULT_BROKEN_POD_CRITERIA as C, loadRepairConfig } from '../../../src/cni/repair/index.js';

const validation = (state: object, lastState: object = {}) => ({ initContainerStatuses: [{ name: 'istio-validation', state, lastState }] });

test('exit code 126 in the current or the last state is the signature', () => {
  assert.match(brokenPodReason(validation({ terminated: { exitCode: 126, reason: 'Error' } }), C) ?? '', /exit code 126/);
  assert.match(brokenPodReason(validation({ waiting: { reason: 'CrashLoopBackOff' } }, { terminated: { exitCode: 126 } }), C) ?? '', /last terminated/);
});

test('healthy, other codes, other containers -> not broken', () => {
  assert.equal(brokenPodReason({}, C), undefined);
  assert.equal(brokenPodReason(validation({ running: {} }), C), undefined);
  assert.equal(brokenPodReason(validation({ terminated: { exitCode: 1 } }), C), undefined);
  assert.equal(brokenPodReason({ initContainerStatuses: [{ name: 'other', state: { terminated: { exitCode: 126 } } }] }, C), undefined);
});

test('a successful current exit wins over a failed history', () => {
  assert.equal(brokenPodReason(validation({ terminated: { exitCode: 0, reason: 'Completed' } }, { terminated: { exitCode: 126 } }), C), undefined);
});

test('annotation, exit code and message filters', () => {
  const pod = { annotations: { 'sidecar.istio.io/status': '{}' }, ...validation({ terminated: { exitCode: 126, message: ' redirect missing \n' } }) };
  assert.ok(brokenPodReason(pod, { ...C, sidecarAnnotation: 'sidecar.istio.io/status' }));
  assert.equal(brokenPodReason(validation({ terminated: { exitCode: 126 } }), { ...C, sidecarAnnotation: 'sidecar.istio.io/status' }), undefined);
  assert.ok(brokenPodReason(pod, { ...C, initTerminationMessage: 'redirect missing' }));
  assert.equal(brokenPodReason(pod, { ...C, initTerminationMessage: 'other' }), undefined);
  assert.ok(brokenPodReason(validation({ terminated: { exitCode: 3 } }), { ...C, initExitCode: 0 }), 'exit code 0 = any failure');
  assert.ok(brokenPodReason({ initContainerStatuses: [{ name: 'x', state: { terminated: { exitCode: 126 } } }] }, { ...C, initContainerName: '' }));
});

test('repair config: defaults, and every problem listed', () => {
  const c = loadRepairConfig({ NODE_NAME: 'n1' });
  assert.equal(c.mode, 'delete');
  assert.equal(c.labelKey, 'cni.istio.io/uninitialized');
  assert.equal(c.criteria.initExitCode, 126);
  assert.throws(
    () => loadRepairConfig({ REPAIR_MODE: 'fix', REPAIR_LABEL_KEY: 'bad key', REPAIR_INIT_CONTAINER_EXIT_CODE: '999' }),
    (err: { code: string; problems: string[] }) => {
      assert.equal(err.code, 'ERR_CONFIG_INVALID');
      for (const n of ['NODE_NAME', 'REPAIR_MODE', 'REPAIR_LABEL_KEY', 'REPAIR_INIT_CONTAINER_EXIT_CODE']) {
        assert.ok(err.problems.some((p) => p.includes(n)), n);
      }
      return true;
    },
  );
  assert.equal(loadRepairConfig({ REPAIR_ENABLED: 'false' }).enabled, false);
});
