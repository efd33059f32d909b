/**
 * `certbroker start --duration-seconds N` stops by itself and exits 0 — also when garbage
 * collection runs often (the process is started with --expose-gc and collects every 250 ms),
 * which is what made a timeout signal inside `AbortSignal.any()` vanish and the stack run on.
 * The whole stack runs for real: devcluster, CA, broker, sample pods, consumer.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { abortAfter } from '../../src/cli/start-stack.js';
import { tempDirSync } from '../support/scratch.js';

const START = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'start.js');
// The subcommand module on its own (as main.ts mounts it), so other subcommands do not matter.
// A script file, not `--input-type=module -e`: worker threads inherit execArgv, and the CA's
// signing workers refuse to start with --input-type.
const SCRIPT = `
  setInterval(() => globalThis.gc(), 250).unref();
  const { command } = await import(${JSON.stringify(START)});
  await command().parseAsync(process.argv.slice(2), { from: 'user' });
`;

test('--duration-seconds 2 ends the stack cleanly with exit code 0, under frequent GC', async () => {
  const dir = tempDirSync('start-stack-test-');
  const script = join(dir, 'start.mjs');
  await writeFile(script, SCRIPT);
  const child = spawn(process.execPath, ['--expose-gc', script, '--duration-seconds', '2', '--interval-ms', '200'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LOG_LEVEL: 'error' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  // A hang guard only (the stack is up in a few seconds): a stack that never stops fails here.
  const guard = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const [code, sig] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  clearTimeout(guard);
  await rm(dir, { recursive: true, force: true });
  assert.equal(sig, null, `the stack did not stop by itself; last output:\n${stdout.slice(-600)}\n${stderr.slice(-600)}`);
  assert.equal(code, 0, stderr.slice(-2000));
  assert.match(stdout, /node broker for node-1/);
  assert.match(stdout, /stopped: consumer, broker, CA and devcluster are down\.\n$/);
});

test('abortAfter: follows the parent signal, fires on its own deadline, and dispose() disarms it', async () => {
  const parent = new AbortController();
  const a = abortAfter(parent.signal, 60_000, 'deadline');
  parent.abort(new Error('stop'));
  assert.equal(a.signal.aborted, true);
  assert.equal((a.signal.reason as Error).message, 'stop');
  a.dispose();

  const b = abortAfter(new AbortController().signal, 1, 'deadline');
  await new Promise<void>((resolve) => b.signal.addEventListener('abort', () => resolve(), { once: true }));
  assert.equal((b.signal.reason as Error).message, 'deadline');
  b.dispose();

  const already = new AbortController();
  already.abort(new Error('before'));
  const c = abortAfter(already.signal, 60_000, 'deadline');
  assert.equal((c.signal.reason as Error).message, 'before');
  c.dispose();
});
