/**
 * The optional-tool probes (tools.ts, the netns probe) and what they are for: with a tool really
 * absent (a PATH that does not hold it, a Python that cannot import grpc_tools), the test files
 * that need it skip with the reason printed and pass, instead of failing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './fixtures.js';
import { Scratch } from './scratch.js';
import { benchToolHints, commandProblem } from './tools.js';

const TOOLS = join(REPO_ROOT, 'dist/test/support/tools.js');

function runNode(args: readonly string[], env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  // A nested `node --test` must not believe it is a subprocess of this runner.
  const base = { ...process.env };
  delete base.NODE_TEST_CONTEXT;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...args], { cwd: REPO_ROOT, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

/** A directory to use as PATH: it exists and holds no programs. */
function emptyPath(t: { after(fn: () => unknown): void }): string {
  return Scratch.forTest(t, 'cb-tools-path-').dir;
}

/** Debian's Python with site-packages turned off: a real interpreter that has no grpc_tools. */
function pythonWithoutGrpc(t: { after(fn: () => unknown): void }): string {
  const s = Scratch.forTest(t, 'cb-tools-py-');
  const wrapper = s.path('python3');
  writeFileSync(wrapper, existsSync('/usr/bin/python3') ? '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n' : '#!/bin/sh\nexit 127\n');
  chmodSync(wrapper, 0o755);
  return wrapper;
}

test('commandProblem: a missing command names what to install; a failing one gives its exit status', () => {
  assert.equal(commandProblem('certbroker-no-such-tool', ['version'], 'Debian package nothing'), 'certbroker-no-such-tool is not installed (Debian package nothing)');
  assert.match(commandProblem(process.execPath, ['-e', 'process.stderr.write("broken\\n"); process.exit(3)'], 'x') ?? '', /exited with 3: broken \(x\)/);
  assert.equal(commandProblem(process.execPath, ['--version'], 'x'), undefined);
});

test('with the tools absent every probe says why, naming the Debian package', async (t) => {
  const r = await runNode(
    ['--input-type=module', '-e', `const m = await import(${JSON.stringify(TOOLS)}); console.log(JSON.stringify({ openssl: m.opensslMissing(), kubectl: m.kubectlMissing(), go: m.goMissing(), python: m.pythonGrpcMissing() }));`],
    { PATH: emptyPath(t), CERTBROKER_TEST_PYTHON: pythonWithoutGrpc(t) },
  );
  assert.equal(r.code, 0, r.out);
  const reasons = JSON.parse(r.out) as Record<string, string | undefined>;
  assert.equal(reasons.openssl, 'openssl is not installed (Debian package openssl)');
  assert.match(reasons.kubectl ?? '', /^kubectl is not installed \(Debian package kubernetes-client/);
  assert.equal(reasons.go, 'go is not installed (Debian package golang-go: apt-get install golang-go)');
  assert.match(reasons.python ?? '', /cannot import grpc and grpc_tools .*python3-grpcio python3-grpc-tools/);
});

test('npm run bench installs nothing: without go and h2load it says what each skips and how to get them', (t) => {
  const none = benchToolHints({ ...process.env, PATH: emptyPath(t) });
  assert.deepEqual(none, [
    "go is not installed (Debian package golang-go: apt-get install golang-go): bench:pki skips its Go crypto/x509 rows (the issue's reference)",
    'h2load is not installed (Debian package nghttp2-client: apt-get install nghttp2-client): bench:ca uses its node:http2 load client and skips the h2load rows',
    'to measure everything: apt-get install golang-go nghttp2-client',
  ]);
  // With working stand-ins for both on PATH there is nothing to say; with only one, only the other.
  const dir = emptyPath(t);
  for (const tool of ['go', 'h2load']) {
    writeFileSync(join(dir, tool), '#!/bin/sh\nexit 0\n');
    chmodSync(join(dir, tool), 0o755);
  }
  assert.deepEqual(benchToolHints({ ...process.env, PATH: dir }), []);
  const onlyGo = emptyPath(t);
  writeFileSync(join(onlyGo, 'go'), '#!/bin/sh\nexit 0\n');
  chmodSync(join(onlyGo, 'go'), 0o755);
  const hints = benchToolHints({ ...process.env, PATH: onlyGo });
  assert.equal(hints.length, 2);
  assert.match(hints[0]!, /^h2load is not installed/);
  assert.equal(hints[1], 'to measure everything: apt-get install nghttp2-client');
});

/** Runs one compiled test file in its own runner; it must pass with every listed test skipped for `reason`. */
async function assertSkips(file: string, env: Record<string, string>, expected: { skipped: number; reason: RegExp }): Promise<void> {
  const r = await runNode(['--test', '--test-reporter=tap', join(REPO_ROOT, 'dist/test', file)], env);
  assert.equal(r.code, 0, `${file} must pass when its tool is absent:\n${r.out.slice(-3000)}`);
  assert.match(r.out, new RegExp(`^# skipped ${expected.skipped}$`, 'm'), r.out.slice(-3000));
  assert.match(r.out, /^# fail 0$/m);
  const reasons = [...r.out.matchAll(/# SKIP (.*)$/gm)].map((m) => m[1]!);
  assert.equal(reasons.length, expected.skipped, r.out.slice(-3000));
  for (const reason of reasons) assert.match(reason, expected.reason);
}

test('python interop: without grpc_tools its tests skip with the reason (they failed with "No module named grpc_tools")', async (t) => {
  await assertSkips('ca/python-interop.e2e.test.js', { CERTBROKER_TEST_PYTHON: pythonWithoutGrpc(t) }, { skipped: 4, reason: /cannot import grpc and grpc_tools/ });
});

test('reflection vs protoc: without grpc_tools the protoc comparisons skip, the link check still runs', async (t) => {
  await assertSkips('grpc/reflection.test.js', { CERTBROKER_TEST_PYTHON: pythonWithoutGrpc(t) }, { skipped: 2, reason: /grpc_tools/ });
});

test('openssl, kubectl, iproute2/iptables absent from PATH: the tests that drive them skip with the reason', async (t) => {
  const PATH = emptyPath(t);
  await assertSkips('pki/csr.test.js', { PATH }, { skipped: 5, reason: /^openssl is not installed \(Debian package openssl\)$/ });
  await assertSkips('devcluster/kubectl.test.js', { PATH }, { skipped: 4, reason: /^kubectl is not installed/ });
  await assertSkips('cni/repair/controller.test.js', { PATH }, { skipped: 5, reason: /^kubectl is not installed/ });
  const root = process.getuid?.() === 0;
  await assertSkips('cni/iptables/applier.test.js', { PATH }, { skipped: 9, reason: root ? /^ip is not installed \(Debian package iproute2\)$/ : /needs root/ });
});
