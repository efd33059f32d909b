/**
 * The CA room's surface (issue 11; docs/architecture.md, "CA server"): tests and benchmarks
 * reach src/ca through src/ca/index.ts, never a file behind it; and ca-server.ts stays wiring,
 * importing the CA's parts and adapters but no gRPC library, Kubernetes client or timer of its own.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../support/fixtures.js';
import { repoImportGraph } from './import-graph.js';

/** Import targets of `file` (relative to the repository): a relative one resolved against it (`src/ca/index.js`), a package as written. */
function imports(file: string): string[] {
  return repoImportGraph()
    .edges.filter((e) => e.from === file)
    .map((e) => e.to?.replace(/\.ts$/u, '.js') ?? e.specifier);
}

test('tests and benchmarks import the CA through src/ca/index.ts', () => {
  const files = [...new Set(repoImportGraph().edges.map((e) => e.from).filter((f) => /^(test|bench)\//u.test(f)))];
  const ca = files.flatMap((file) => imports(file).filter((to) => to.startsWith('src/ca/')).map((to) => ({ file, to })));
  assert.ok(ca.length > 30, `${ca.length} CA imports read`);
  assert.deepEqual(ca.filter((i) => i.to !== 'src/ca/index.js').map((i) => `${i.file}: ${i.to}`), []);
});

test('ca-server.ts is wiring: no gRPC library, Kubernetes client or timers of its own', () => {
  const text = readFileSync(join(REPO_ROOT, 'src/ca/ca-server.ts'), 'utf8');
  const external = imports('src/ca/ca-server.ts').filter((to) => !to.startsWith('src/'));
  assert.deepEqual(external, []);
  assert.doesNotMatch(text, /\bset(Timeout|Interval)\s*\(/u);
});
