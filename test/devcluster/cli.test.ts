/**
 * `certbroker devcluster` as a process: it writes a 0600 admin kubeconfig, prints how to use
 * it, serves kubectl, seeds --samples and --apply manifests, and exits 0 on SIGTERM. Bad
 * configuration is one clear error listing every problem.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { devClusterConfig } from '../../src/devcluster/run.js';
import { ConfigError } from '../../src/core/config.js';
import { kubectlMissing } from '../support/tools.js';
import { Scratch } from '../support/scratch.js';

// The subcommand module itself (what src/cli/main.ts loads), driven through commander.
const CLI_MODULE = resolve('dist/src/cli/devcluster.js');
const RUNNER = `import(${JSON.stringify(CLI_MODULE)}).then((m) => m.command().parseAsync(process.argv.slice(2), { from: 'user' }))`;

function kubectl(kubeconfig: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((res) => {
    execFile('kubectl', ['--kubeconfig', kubeconfig, '--request-timeout', '10s', ...args], { timeout: 20000 }, (err, stdout, stderr) => {
      res({ code: err ? 1 : 0, stdout, stderr });
    });
  });
}

test('certbroker devcluster runs standalone, writes an admin kubeconfig and stops on SIGTERM', { skip: kubectlMissing() }, async (t) => {
  const dir = Scratch.forTest(t, 'devcluster-cli-').dir;
  const kubeconfig = join(dir, 'nested', 'kubeconfig');
  const manifest = join(dir, 'extra.yaml');
  await writeFile(manifest, 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: from-apply\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: from-apply\ndata:\n  k: v\n');
  const runner = join(dir, 'run.mjs');
  await writeFile(runner, RUNNER);
  const child = spawn(process.execPath, [runner, '--port', '0', '--kubeconfig', kubeconfig, '--samples', '--apply', manifest, '--log-level', 'silent'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((res) => child.on('exit', (code) => res(code)));
  try {
    for (let i = 0; i < 2000 && !out.includes('Stop with Ctrl-C'); i++) await new Promise((r) => setTimeout(r, 5));
    assert.match(out, /devcluster API server: https:\/\/127\.0\.0\.1:\d+/, err);
    assert.ok(out.includes(`export KUBECONFIG=${kubeconfig}`));
    assert.equal((await stat(kubeconfig)).mode & 0o777, 0o600);
    const pods = await kubectl(kubeconfig, ['get', 'pods', '-A', '-o', 'name']);
    assert.equal(pods.code, 0, pods.stderr);
    assert.deepEqual(pods.stdout.trim().split('\n').sort(), ['pod/httpbin-1', 'pod/ztunnel-node-1']);
    const cm = await kubectl(kubeconfig, ['-n', 'from-apply', 'get', 'configmap', 'cfg', '-o', 'jsonpath={.data.k}']);
    assert.equal(cm.stdout, 'v');
    const token = await kubectl(kubeconfig, ['-n', 'istio-system', 'create', 'token', 'ztunnel', '--audience', 'istio-ca']);
    assert.equal(token.code, 0, token.stderr);
    assert.ok(!out.includes(token.stdout.trim()) && !err.includes(token.stdout.trim()), 'tokens never printed by the server');
  } finally {
    child.kill('SIGTERM');
  }
  assert.equal(await exited, 0);
});

test('devcluster configuration lists every bad setting at once', () => {
  assert.throws(
    () => devClusterConfig({ port: 'eighty', simulateKubelet: 'maybe' }, {}),
    (e: unknown) => e instanceof ConfigError && e.problems.length === 2 && /DEVCLUSTER_PORT="eighty"/.test(e.message) && /DEVCLUSTER_SIMULATE_KUBELET="maybe"/.test(e.message),
  );
  const c = devClusterConfig({}, { DEVCLUSTER_PORT: '0', DEVCLUSTER_SIMULATE_KUBELET: 'false' });
  assert.equal(c.port, 0);
  assert.equal(c.simulateKubelet, false);
  assert.equal(c.podsDir, undefined, 'no pod volumes are written unless asked');
  assert.ok(Object.isFrozen(c));
  assert.equal(devClusterConfig({ podsDir: 'pods' }, { DEVCLUSTER_PODS_DIR: '/elsewhere' }).podsDir, resolve('pods'), 'the flag over the env, made absolute');
});
