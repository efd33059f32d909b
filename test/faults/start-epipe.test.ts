/**
 * Fault suite — `certbroker start | head -1`: the reader of stdout goes away after the first
 * line. The stack must stop quietly (no EPIPE stack trace), exit 0, and remove its temp dir
 * (admin kubeconfig, broker sockets). Today's code (before this suite) died on the unhandled
 * 'error' event of stdout with exit code 1 and left `certbroker-stack-*` behind.
 *
 * The stack runs for real from the CLI entry (dist/src/cli/main.js) with TMPDIR pointing at a
 * scratch directory, so whatever it leaves there is visible. `--duration-seconds` makes sure it
 * writes again (its last view and the "stopped" line) even if the view never changes.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { test } from 'node:test';
import { CLI_MAIN } from '../support/cli-process.js';
import { Scratch } from '../support/scratch.js';

test('start | head -1: exits 0 without a stack trace and leaves no temp dir', { timeout: 120_000 }, async () => {
  const tmp = Scratch.forFile('fault-start-epipe-');
  const child = spawn(process.execPath, [CLI_MAIN, 'start', '--duration-seconds', '10', '--interval-ms', '200'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TMPDIR: tmp.dir },
  });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  // head -1: read up to the first newline, then close the pipe.
  const first = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        child.stdout.destroy();
        resolve(out.slice(0, nl));
      }
    });
    child.once('exit', () => reject(new Error(`exited before printing a line:\n${stderr}`)));
  });
  assert.match(first, /^certbroker local stack/);
  // A hang guard only; nothing asserts how long the stop took.
  const guard = setTimeout(() => child.kill('SIGKILL'), 90_000);
  const [code, signal] = await exited;
  clearTimeout(guard);
  assert.equal(signal, null, `killed by the guard:\n${stderr.slice(-2000)}`);
  assert.equal(code, 0, stderr.slice(-2000));
  assert.doesNotMatch(stderr, /EPIPE|\n\s+at /, 'no stack trace');
  assert.deepEqual(readdirSync(tmp.dir), [], 'the stack removed its temp dir');
});
