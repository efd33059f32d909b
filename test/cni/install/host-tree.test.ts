/**
 * Failing tests leave no install-cni daemon (nor its host tree) behind. A test file that fails on
 * purpose in the two ways that used to leak runs in its own `node --test`:
 * - the tree's cleanup registered before the daemon's stop (after hooks run in order), and the
 *   test failing before its own `daemon.stop()`;
 * - an `after` hook that throws before the one that stops the daemon (node then skips the rest).
 * Afterwards no daemon it started is alive and no tree is left. (Before, the second case left
 * install-cni running, chaining into its tree, until someone killed it.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { REPO_ROOT } from '../../support/fixtures.js';
import { Scratch } from '../../support/scratch.js';

const HOST_TREE = pathToFileURL(join(REPO_ROOT, 'dist/test/cni/install/host-tree.js')).href;

const failing = `
import { after, test } from 'node:test';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CONFORMANCE, DaemonProcess, makeHostTree, treeEnv, waitFor } from ${JSON.stringify(HOST_TREE)};

async function started(tree) {
  writeFileSync(join(tree.netDir, '10-calico.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
  // info: a daemon orphaned by its test process logs nothing, so no EPIPE ends it by chance.
  const daemon = new DaemonProcess(treeEnv(tree, { LOG_LEVEL: 'info', UNINSTALL_ON_EXIT: 'never' }));
  await waitFor(() => daemon.hasLog('install-cni started'), 'started', daemon);
  console.log('daemon ' + daemon.child.pid + ' tree ' + tree.root);
  return daemon;
}

test('cleanup registered before the stop, and the test fails before it stops the daemon', async (t) => {
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  const daemon = await started(tree);
  t.after(() => daemon.stop('SIGKILL'));
  throw new Error('failing on purpose');
});

test('an after hook throws first: neither the cleanup nor the stop runs', async (t) => {
  t.after(() => { throw new Error('a server close that fails'); });
  const tree = makeHostTree();
  t.after(() => tree.cleanup());
  const daemon = await started(tree);
  t.after(() => daemon.stop('SIGKILL'));
  throw new Error('failing on purpose too');
});
`;

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test('a test file that fails on purpose leaves no install-cni daemon and no host tree behind', { timeout: 120_000 }, async (t) => {
  const runner = Scratch.forTest(t, 'cb-host-tree-runner-');
  const file = await runner.write('fails.test.mjs', failing);
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // a nested runner, not a subprocess of this one
  // In its own process group, so that a run that hangs (a daemon's pipe holding its test
  // process open, as before) can be ended with everything it started.
  const child = spawn(process.execPath, ['--test', '--test-reporter=tap', file], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const killGroup = () => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  const { code, out, hung } = await new Promise<{ code: number | null; out: string; hung: boolean }>((resolve) => {
    let text = '';
    const bound = setTimeout(() => {
      killGroup();
      resolve({ code: null, out: text, hung: true });
    }, 60_000);
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.stderr.on('data', (d: Buffer) => (text += d.toString()));
    child.on('exit', (c) => {
      clearTimeout(bound);
      resolve({ code: c, out: text, hung: false });
    });
  });
  const started = [...out.matchAll(/daemon (\d+) tree (\S+)/g)].map((m) => ({ pid: Number(m[1]), root: m[2]! }));
  try {
    assert.equal(hung, false, `the failing file never ended (a daemon kept it open):\n${out}`);
    assert.notEqual(code, 0, 'the file fails');
    assert.match(out, /failing on purpose too/);
    assert.equal(started.length, 2, out);
    // SIGKILL is sent before the runner exits; give the kernel a moment to reap (bounded, not timed).
    for (let i = 0; i < 100 && started.some((d) => alive(d.pid)); i++) await delay(20);
    assert.deepEqual(started.filter((d) => alive(d.pid)).map((d) => d.pid), [], `daemons left running:\n${out}`);
    assert.deepEqual(started.filter((d) => existsSync(d.root)).map((d) => d.root), [], 'host trees left behind');
  } finally {
    // Whatever the outcome, nothing of the nested run outlives this test.
    killGroup();
    for (const d of started) if (alive(d.pid)) process.kill(d.pid, 'SIGKILL');
  }
});
