/**
 * The plugin as the runtime sees it: a process with CNI_* variables and stdin, answering on stdout
 * with a result or the spec's error object and a non-zero exit, logs on stderr only. Bad input of
 * every kind gets the right code and a clear message, never a stack trace.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execPlugin, type ExecOutcome } from '../../support/cni-runner.js';
import { tempDirSync } from '../../support/scratch.js';

const here = fileURLToPath(new URL('.', import.meta.url));
const MAIN = resolve(here, '../../../src/cni/plugin/main.js');

let dir = '';
before(() => {
  dir = tempDirSync('cni-proc-');
});
after(() => rmSync(dir, { recursive: true, force: true }));

const ENV_OK = { CNI_CONTAINERID: 'c0ffee01', CNI_NETNS: '/var/run/netns/absent-x', CNI_IFNAME: 'eth0', CNI_PATH: '/opt/cni/bin' };

function run(command: string | undefined, stdin: string | undefined, env: Record<string, string | undefined> = ENV_OK): Promise<ExecOutcome> {
  return execPlugin({ command: process.execPath, args: [MAIN], env: { ...env, CNI_COMMAND: command }, ...(stdin !== undefined ? { stdin } : {}) });
}

const conf = (over: Record<string, unknown> = {}) =>
  JSON.stringify({ cniVersion: '1.0.0', name: 'k8s-pod-network', type: 'istio-cni', cni_agent_run_dir: dir, ...over });

/** Asserts the spec's error object (exactly its four keys) and a failing exit; returns it. */
function assertCniError(o: ExecOutcome, code: number, msg: RegExp): { cniVersion: string; msg: string } {
  assert.notEqual(o.code, 0, `exit code must be non-zero; stdout: ${o.stdout} stderr: ${o.stderr.slice(-1500)}`);
  assert.doesNotMatch(o.stdout, /\n\s+at /, 'no stack trace on stdout');
  const parsed = JSON.parse(o.stdout) as Record<string, unknown>;
  assert.deepEqual(Object.keys(parsed).sort(), ['cniVersion', 'code', 'details', 'msg']);
  assert.equal(parsed.code, code, `code (msg: ${String(parsed.msg)})`);
  assert.match(String(parsed.msg), msg);
  for (const line of o.stderr.split('\n').filter((l) => l !== '')) JSON.parse(line); // logs are JSON lines
  return parsed as { cniVersion: string; msg: string };
}

test('VERSION lists 0.1.0 ... 1.1.0', async () => {
  const o = await run('VERSION', undefined, {});
  assert.equal(o.code, 0);
  assert.deepEqual(JSON.parse(o.stdout), {
    cniVersion: '1.1.0',
    supportedVersions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'],
  });
});

test('no stdin -> 6', async () => {
  assertCniError(await run('ADD', undefined), 6, /no network configuration/);
});

test('garbage JSON -> 6', async () => {
  assertCniError(await run('ADD', '{"cniVersion": "1.0.0", '), 6, /not valid JSON/);
  assertCniError(await run('ADD', '"just a string"'), 6, /not a JSON object/);
});

test('unknown cniVersion -> 1', async () => {
  const e = assertCniError(await run('ADD', conf({ cniVersion: '2.0.0' })), 1, /incompatible CNI versions/);
  assert.equal(e.cniVersion, '1.1.0');
});

test('missing or unknown CNI_* variables -> 4, naming them', async () => {
  assertCniError(await run(undefined, conf()), 4, /CNI_COMMAND/);
  assertCniError(await run('FROB', conf()), 4, /unknown CNI_COMMAND/);
  const e = assertCniError(await run('ADD', conf(), { CNI_CONTAINERID: 'c1', CNI_IFNAME: 'eth0' }), 4, /CNI_NETNS, CNI_PATH/);
  assert.equal(e.cniVersion, '1.0.0', 'the error speaks the request version');
  assertCniError(await run('ADD', conf(), { ...ENV_OK, CNI_CONTAINERID: '../etc' }), 4, /CNI_CONTAINERID/);
  assertCniError(await run('ADD', conf(), { ...ENV_OK, CNI_IFNAME: 'much-too-long-ifname' }), 4, /CNI_IFNAME/);
  assertCniError(await run('ADD', conf(), { ...ENV_OK, CNI_ARGS: 'K8S_POD_NAME=a;SURPRISE=1' }), 4, /unknown args/);
});

test('invalid network config -> 7, every problem listed', async () => {
  const e = assertCniError(await run('ADD', conf({ ambient_enabled: 'yes', exclude_namespaces: 5 })), 7, /ambient_enabled/);
  assert.match(e.msg, /exclude_namespaces/);
});

const prev04 = { cniVersion: '0.4.0', interfaces: [{ name: 'eth0' }], ips: [{ version: '4', address: '10.244.1.7/24', gateway: '10.244.1.1', interface: 0 }] };

test('ADD with no Kubernetes args passes prevResult through unchanged', async () => {
  const prev = { ...prev04, cniVersion: '1.0.0', ips: [{ address: '10.244.1.7/24', interface: 0, gateway: '10.244.1.1' }], custom: { kept: true } };
  const o = await run('ADD', conf({ prevResult: prev }));
  assert.equal(o.code, 0, o.stdout + o.stderr);
  assert.deepEqual(JSON.parse(o.stdout), prev);
});

test('a prevResult of another supported version is converted; of an unknown version -> 1', async () => {
  const o = await run('ADD', conf({ prevResult: prev04 }));
  assert.equal(o.code, 0, o.stdout);
  const r = JSON.parse(o.stdout) as { cniVersion: string; ips: Array<Record<string, unknown>> };
  assert.equal(r.cniVersion, '1.0.0');
  assert.deepEqual(r.ips, [{ address: '10.244.1.7/24', gateway: '10.244.1.1', interface: 0 }]);
  assertCniError(await run('ADD', conf({ prevResult: { ...prev04, cniVersion: '3.0.0' } })), 1, /prevResult has unsupported cniVersion/);
  assertCniError(await run('ADD', conf({ prevResult: 'ips' })), 6, /prevResult/);
});

test('a malformed prevResult fails ADD and CHECK with 6 naming the field, and is never echoed back', async () => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ cniVersion: '1.0.0', ips: 7 }, /ips is not an array \(got 7\)/],
    [{ cniVersion: '1.0.0', interfaces: 'eth0' }, /interfaces is not an array \(got "eth0"\)/],
    [{ cniVersion: '1.0.0', ips: [{ address: 'not-an-ip/24' }] }, /ips\[0\]\.address is not an address in CIDR notation/],
    [{ cniVersion: '1.0.0', ips: [{ address: '10.244.1.7' }] }, /ips\[0\]\.address is not an address in CIDR notation \(got "10\.244\.1\.7"\)/],
    [{ cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [{ address: '10.244.1.7/24', interface: 3 }] }, /ips\[0\]\.interface is not an index into interfaces/],
    [{ cniVersion: '0.4.0', ips: [{ version: '6', address: '10.244.1.7/24' }] }, /ips\[0\]\.version does not match the address/],
    [{ cniVersion: '0.2.0', ip4: { ip: 'fd00::7/64' } }, /ip4\.ip is an IPv6 address/],
  ];
  for (const [prevResult, msg] of cases) {
    const add = await run('ADD', conf({ prevResult }));
    const e = assertCniError(add, 6, msg);
    assert.match(e.msg, /^prevResult is not a valid CNI \d\.\d\.\d result: /);
    assert.equal(e.cniVersion, '1.0.0');
    assert.equal(add.stdout.includes('"ips":'), false, 'the garbage is not printed as a result');
    assertCniError(await run('CHECK', conf({ prevResult })), 6, msg);
  }
  // Several problems: the first in msg, all of them in details.
  const many = JSON.parse((await run('ADD', conf({ prevResult: { cniVersion: '1.0.0', ips: [{ address: 'x' }, { address: '10.0.0.1/33', gateway: 'gw' }], routes: {} } }))).stdout) as { msg: string; details: string };
  assert.match(many.msg, /ips\[0\]\.address .*\(and 3 more problems, see details\)$/);
  assert.deepEqual(many.details.split('; ').map((d) => d.split(' ')[0]), ['ips[0].address', 'ips[1].address', 'ips[1].gateway', 'routes']);
});

test('excluded namespaces and the own agent pod pass without any kubeconfig', async () => {
  const args = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-1';
  const o = await run('ADD', conf({ exclude_namespaces: ['kube-system'], prevResult: prev04 }), { ...ENV_OK, CNI_ARGS: args });
  assert.equal(o.code, 0, o.stdout);
  const own = 'K8S_POD_NAMESPACE=istio-system;K8S_POD_NAME=istio-cni-node-x7k2p';
  const o2 = await run('ADD', conf({ ambient_enabled: true, pod_namespace: 'istio-system' }), { ...ENV_OK, CNI_ARGS: own });
  assert.equal(o2.code, 0, o2.stdout);
  assert.deepEqual(JSON.parse(o2.stdout), { cniVersion: '1.0.0', dns: {} });
});

test('a pod when the kubeconfig is not written yet -> 11 try again later', async () => {
  const args = 'K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1';
  assertCniError(await run('ADD', conf(), { ...ENV_OK, CNI_ARGS: args }), 11, /cannot read kubeconfig/);
});

test('an unreachable API server -> 11 after the configured retries', async () => {
  // A port that was just free: nothing listens there.
  const port = await new Promise<number>((res) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });
  const kubeconfig = join(dir, 'kubeconfig-unreachable');
  writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- cluster:',
      '    insecure-skip-tls-verify: true',
      `    server: https://127.0.0.1:${port}`,
      '  name: local',
      'contexts:',
      '- context: {cluster: local, user: istio-cni}',
      '  name: ctx',
      'current-context: ctx',
      'users:',
      '- name: istio-cni',
      '  user: {token: not-a-real-token}',
      '',
    ].join('\n'),
  );
  const o = await run(
    'ADD',
    conf({ kubernetes: { kubeconfig }, pod_retrieval_max_retries: 3, pod_retrieval_interval_ms: 10, plugin_log_level: 'debug' }),
    { ...ENV_OK, CNI_ARGS: 'K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1' },
  );
  const e = assertCniError(o, 11, /ECONNREFUSED/);
  assert.match(e.msg, new RegExp(`127\\.0\\.0\\.1:${port}`));
  assert.equal((o.stderr.match(/"API request failed"/g) ?? []).length, 3, 'three attempts');
  assert.doesNotMatch(o.stderr, /not-a-real-token/, 'the token is never logged');
});

test('CHECK needs 0.4.0+, STATUS and GC need 1.1.0', async () => {
  assertCniError(await run('CHECK', conf({ cniVersion: '0.3.1' })), 1, /does not allow CHECK/);
  assert.equal((await run('CHECK', conf({ prevResult: { ...prev04, cniVersion: '1.0.0' } }))).code, 0);
  assertCniError(await run('STATUS', conf(), {}), 1, /does not allow STATUS/);
  assertCniError(await run('GC', conf(), {}), 1, /does not allow GC/);
  const gc = await run('GC', conf({ cniVersion: '1.1.0', 'cni.dev/valid-attachments': [{ containerID: 'a', ifname: 'eth0' }] }), {});
  assert.equal(gc.code, 0);
  assert.equal(gc.stdout, '');
});

test('STATUS reports 50 until install-cni has written the kubeconfig, then success', async () => {
  const runDir = mkdtempSync(join(dir, 'run-'));
  assertCniError(await run('STATUS', conf({ cniVersion: '1.1.0', cni_agent_run_dir: runDir }), {}), 50, /kubeconfig/);
  writeFileSync(join(runDir, 'istio-cni-kubeconfig'), 'apiVersion: v1\n');
  const o = await run('STATUS', conf({ cniVersion: '1.1.0', cni_agent_run_dir: runDir }), {});
  assert.equal(o.code, 0, o.stdout);
});

test('DEL of a namespace that is already gone succeeds quietly', async () => {
  const o = await run('DEL', conf({ prevResult: prev04 }));
  assert.equal(o.code, 0, o.stdout);
  assert.equal(o.stdout, '');
});

test('DEL does not fail on a plugin config it cannot use (teardown never gets stuck), ADD does', async () => {
  const bad = conf({ ambient_enabled: 'yes' });
  const del = await run('DEL', bad);
  assert.equal(del.code, 0, del.stdout);
  assert.match(del.stderr, /invalid network configuration/);
  assertCniError(await run('ADD', bad), 7, /ambient_enabled/);
  assertCniError(await run('DEL', '{not json'), 6, /not valid JSON/);
});

test('`certbroker cni-plugin` answers exactly as the standalone entry', async () => {
  const cli = resolve(here, '../../../src/cli/main.js');
  const viaCli = await execPlugin({
    command: process.execPath,
    args: [cli, 'cni-plugin'],
    env: { ...ENV_OK, CNI_COMMAND: 'ADD' },
    stdin: conf({ prevResult: prev04 }),
  });
  const direct = await run('ADD', conf({ prevResult: prev04 }));
  assert.equal(viaCli.code, 0, viaCli.stderr);
  assert.equal(viaCli.stdout, direct.stdout);
  const bad = await execPlugin({ command: process.execPath, args: [cli, 'cni-plugin'], env: { ...ENV_OK, CNI_COMMAND: 'ADD' }, stdin: '' });
  assertCniError(bad, 6, /no network configuration/);
});

test('plugin_log_level decides what reaches stderr; stdout carries only the result', async () => {
  const args = { ...ENV_OK, CNI_ARGS: 'K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-1' };
  const quiet = await run('ADD', conf({ exclude_namespaces: ['kube-system'], plugin_log_level: 'none' }), args);
  assert.equal(quiet.code, 0);
  assert.equal(quiet.stderr, '');
  const chatty = await run('ADD', conf({ exclude_namespaces: ['kube-system'], plugin_log_level: 'debug' }), args);
  assert.equal(chatty.code, 0);
  const lines = chatty.stderr.trim().split('\n').map((l) => JSON.parse(l) as { level: string; msg: string });
  assert.ok(lines.some((l) => l.msg === 'pod namespace excluded' && l.level === 'info'));
  assert.deepEqual(JSON.parse(chatty.stdout), JSON.parse(quiet.stdout));
});
