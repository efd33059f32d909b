/**
 * Failing tests leave no temporary directories behind: a test file that fails on purpose in
 * every way that used to leak (a failing test, an `after` hook that throws before the one that
 * removes the directory, a directory nobody removes) runs in its own `node --test`; afterwards
 * no directory with its prefix is left in the temp dir.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './fixtures.js';
import { Scratch, tempDirSync } from './scratch.js';

const SCRATCH = pathToFileURL(join(REPO_ROOT, 'dist/test/support/scratch.js')).href;

const failing = (prefix: string) => `
import { after, test } from 'node:test';
import { existsSync } from 'node:fs';
import { Scratch, tempDirSync } from ${JSON.stringify(SCRATCH)};

const made = [];
const note = (dir) => { made.push(dir); console.log('made ' + dir); return dir; };

// An after hook that throws runs first and makes node skip every after hook registered later,
// including the one Scratch.forFile registers.
after(() => { throw new Error('a server close that fails'); });
const fileScratch = Scratch.forFile(${JSON.stringify(prefix + 'file-')});
note(fileScratch.dir);
// Nobody removes this one.
note(tempDirSync(${JSON.stringify(prefix + 'loose-')}));

test('a test that fails with its own scratch directory', (t) => {
  const dir = note(Scratch.forTest(t, ${JSON.stringify(prefix + 'test-')}).dir);
  if (!existsSync(dir)) throw new Error('not made');
  throw new Error('failing on purpose');
});

test('a test that fails while its directory is removed in finally', async () => {
  const s = Scratch.create(${JSON.stringify(prefix + 'finally-')});
  note(s.dir);
  try {
    throw new Error('failing on purpose too');
  } finally {
    await s.remove();
  }
});
`;

function leftovers(prefix: string): string[] {
  return readdirSync(tmpdir()).filter((n) => n.startsWith(prefix));
}

test('a test file that fails on purpose leaves none of its scratch directories behind', async (t) => {
  const prefix = `cb-scratch-proof-${process.pid}-`;
  const runner = Scratch.forTest(t, 'cb-scratch-runner-');
  const file = await runner.write('fails.test.mjs', failing(prefix));
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT; // a nested runner, not a subprocess of this one
  const { code, out } = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, ['--test', '--test-reporter=tap', file], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.stderr.on('data', (d: Buffer) => (text += d.toString()));
    child.on('exit', (c) => resolve({ code: c, out: text }));
  });
  assert.notEqual(code, 0, 'the file fails');
  assert.match(out, /failing on purpose/);
  assert.match(out, /failing on purpose too/);
  assert.match(out, /a server close that fails/);
  const made = [...out.matchAll(/made (\S+)/g)].map((m) => m[1]!);
  assert.equal(made.length, 4, out);
  for (const dir of made) assert.ok(dir.startsWith(join(tmpdir(), prefix)), dir);
  assert.deepEqual(leftovers(prefix), [], `left behind:\n${out}`);
});

test('Scratch.forTest and remove(): the directory exists while in use and is gone after', async (t) => {
  let seen = '';
  await t.test('inner', (tt) => {
    seen = Scratch.forTest(tt, 'cb-scratch-inner-').dir;
    assert.ok(existsSync(seen));
  });
  assert.ok(seen !== '' && !existsSync(seen));
  const loose = tempDirSync('cb-scratch-loose-');
  const s = Scratch.create('cb-scratch-explicit-');
  await s.remove();
  assert.ok(!existsSync(s.dir));
  assert.ok(existsSync(loose), 'removed only at exit');
});
