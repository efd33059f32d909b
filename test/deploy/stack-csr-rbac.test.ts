/**
 * `certbroker start --signer kubernetes-csr` grants the CA and the k8s-signer the cluster roles
 * deploy/ + components/kubernetes-csr ship: the CSR roles exactly (same names, same rules), the
 * CA's base role at most what deploy/ grants (the stack publishes no trust bundle), so the local
 * stack runs with the operator's least privilege and the two cannot drift apart.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { csrStackRbacObjects } from '../../src/cli/stack-csr.js';
import { kubectlMissing } from '../support/tools.js';
import { renderDeployWith } from './manifests.js';

interface Role {
  readonly kind: string;
  readonly metadata: { readonly name: string };
  readonly rules?: ReadonlyArray<Record<string, unknown>>;
}

const normal = (rules: ReadonlyArray<Record<string, unknown>> = []) => rules.map((r) => JSON.stringify(Object.fromEntries(Object.entries(r).sort(([a], [b]) => a.localeCompare(b))))).sort();

test('the stack\'s cluster roles for the CSR backend are those of deploy/components/kubernetes-csr', { skip: kubectlMissing() }, async () => {
  const deployed = (await renderDeployWith(['components/kubernetes-csr'])).filter((o) => o.kind === 'ClusterRole') as unknown as Role[];
  const stack = (csrStackRbacObjects() as Role[]).filter((o) => o.kind === 'ClusterRole');
  assert.ok(stack.length >= 4);
  for (const role of stack) {
    const shipped = deployed.find((d) => d.metadata.name === role.metadata.name);
    assert.ok(shipped, `deploy/ ships ClusterRole ${role.metadata.name}`);
    if (role.metadata.name === 'certbroker-ca') {
      const extra = normal(role.rules).filter((r) => !normal(shipped.rules).includes(r));
      assert.deepEqual(extra, [], 'the stack grants the CA nothing deploy/ does not');
    } else assert.deepEqual(normal(role.rules), normal(shipped.rules), role.metadata.name);
  }
});
