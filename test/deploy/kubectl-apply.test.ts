/**
 * What an operator runs: `kubectl apply -k deploy/` (real kubectl, built-in kustomize) against
 * the devcluster succeeds for every object; afterwards `kubectl diff -k` finds nothing to change.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { kubectl, startCluster, type DevCluster } from '../support/cluster.js';
import { REPO_ROOT, renderDeploy } from './manifests.js';
import { kubectlMissing } from '../support/tools.js';

const skip = kubectlMissing();
let cluster: DevCluster;
before(async () => {
  if (skip) return;
  cluster = await startCluster({ simulateKubelet: false });
});
after(() => cluster?.close());

test('kubectl apply -k deploy/ creates every rendered object', { skip }, async () => {
  const first = await kubectl(cluster, ['apply', '-k', `${REPO_ROOT}deploy/`], { timeoutMs: 60_000 });
  assert.equal(first.code, 0, first.stderr);
  const created = first.stdout.split('\n').filter((l) => l.endsWith(' created'));
  assert.equal(created.length, (await renderDeploy()).length, first.stdout);

  // Nothing left to change: kubectl diff exits 0 (1 would mean differences).
  const diff = await kubectl(cluster, ['diff', '-k', `${REPO_ROOT}deploy/`], { timeoutMs: 60_000 });
  assert.equal(diff.code, 0, diff.stdout + diff.stderr);
  const second = await kubectl(cluster, ['apply', '-k', `${REPO_ROOT}deploy/`], { timeoutMs: 60_000 });
  assert.equal(second.code, 0, second.stderr);

  const ds = await kubectl(cluster, ['-n', 'istio-system', 'get', 'daemonset', 'istio-cni-node', '-o', 'jsonpath={.spec.template.spec.serviceAccountName}']);
  assert.equal(ds.stdout, 'istio-cni');
});
