/**
 * The CA room's surface (issue 11; docs/architecture.md, "CA server"): tests and benchmarks
 * reach src/ca through src/ca/index.ts, never a file behind it; and ca-server.ts stays wiring,
 * importing the CA's parts and adapters but no gRPC library, Kubernetes client or timer of its own.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { REPO_ROOT } from '../support/fixtures.js';

function tsFiles(dir: string): string[] {
  return readdirSync(join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name).split('\\').join('/')] : [],
  );
}

/** Relative import specifiers (static, `export … from`, dynamic) of `file`, resolved against the repository. */
function imports(file: string): string[] {
  const text = readFileSync(join(REPO_ROOT, file), 'utf8');
  return [...text.matchAll(/^\s*(?:import|export)\b[^;]*?\bfrom\s+'([^']+)'|\bimport\s*\(\s*'([^']+)'\s*\)/gmu)]
    .map((m) => (m[1] ?? m[2])!)
    .map((spec) => (spec.startsWith('.') ? normalize(join(dirname(file), spec)).split('\\').join('/') : spec));
}

test('tests and benchmarks import the CA through src/ca/index.ts', () => {
  const ca = [...tsFiles('test'), ...tsFiles('bench')].flatMap((file) => imports(file).filter((to) => to.startsWith('src/ca/')).map((to) => ({ file, to })));
  assert.ok(ca.length > 30, `${ca.length} CA imports read`);
  assert.deepEqual(ca.filter((i) => i.to !== 'src/ca/index.js').map((i) => `${i.file}: ${i.to}`), []);
});

test('ca-server.ts is wiring: no gRPC library, Kubernetes client or timers of its own', () => {
  const text = readFileSync(join(REPO_ROOT, 'src/ca/ca-server.ts'), 'utf8');
  const external = imports('src/ca/ca-server.ts').filter((to) => !to.startsWith('src/'));
  assert.deepEqual(external, []);
  assert.doesNotMatch(text, /\bset(Timeout|Interval)\s*\(/u);
});
