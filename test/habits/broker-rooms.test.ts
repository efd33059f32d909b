/**
 * The node broker's rooms (issue 11; docs/architecture.md, "Node broker"): which room may import
 * which, and that tests and benchmarks reach the broker through a room's index.ts (its real
 * surface), never a file behind it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join, normalize, relative } from 'node:path';
import { sourceFiles } from './source-files.js';
import { repoImportGraph, type ImportEdge } from './import-graph.js';

/** Where an import points, as written (`src/broker/index.js`, `node:crypto`, `@grpc/grpc-js`), relative to the repository. */
function target(e: ImportEdge): string {
  return e.to?.replace(/\.ts$/u, '.js') ?? e.specifier;
}

interface Edge {
  readonly from: string;
  readonly to: string;
}

function brokerEdges(): Edge[] {
  return repoImportGraph()
    .edges.filter((e) => e.from.startsWith('src/broker/'))
    .map((e) => ({ from: e.from.replace(/^src\//u, ''), to: target(e).replace(/^src\//u, '') }));
}

/** The room of a src/broker path: cache, adapters, fronts/<name>, client, or top (the wiring). */
function roomOf(path: string): string {
  const rest = path.slice('broker/'.length);
  if (rest.startsWith('fronts/')) return rest.split('/').length > 2 ? `fronts/${rest.split('/')[1]}` : 'fronts';
  return rest.includes('/') ? rest.split('/')[0]! : 'top';
}

const ERRORS = 'broker/errors.js';

test('cache/ imports nothing of the broker but its errors, and no gRPC, Kubernetes, filesystem or network code', () => {
  const edges = brokerEdges().filter((e) => roomOf(e.from) === 'cache');
  assert.ok(edges.length > 20, `${edges.length} imports read`);
  const wrong = edges.filter((e) =>
    e.to.startsWith('broker/')
      ? e.to !== ERRORS && roomOf(e.to) !== 'cache'
      : !/^(core|pki|spiffe)\//u.test(e.to) && e.to !== 'node:crypto',
  );
  assert.deepEqual(wrong, []);
});

test('adapters/ import the cache room, never the fronts, the client or the wiring', () => {
  const edges = brokerEdges().filter((e) => roomOf(e.from) === 'adapters' && e.to.startsWith('broker/'));
  assert.ok(edges.some((e) => roomOf(e.to) === 'cache'));
  assert.deepEqual(edges.filter((e) => e.to !== ERRORS && !['cache', 'adapters'].includes(roomOf(e.to))), []);
});

test('attestation/ imports nothing of the broker but its errors, and no gRPC or Kubernetes code', () => {
  const edges = brokerEdges().filter((e) => roomOf(e.from) === 'attestation');
  assert.ok(edges.length > 5, `${edges.length} imports read`);
  const wrong = edges.filter((e) => (e.to.startsWith('broker/') ? e.to !== ERRORS && roomOf(e.to) !== 'attestation' : /^(@grpc|@kubernetes|kube\/|grpc\/)/u.test(e.to)));
  assert.deepEqual(wrong, []);
});

test('a front reads the cache room (and the socket set-up, the caller attestation), never the CA, Kubernetes, another front or the wiring', () => {
  const edges = brokerEdges().filter((e) => roomOf(e.from).startsWith('fronts'));
  assert.ok(edges.some((e) => roomOf(e.to) === 'cache'));
  const allowed = (e: Edge) =>
    !e.to.startsWith('broker/')
      ? !/^(@kubernetes|kube\/)/u.test(e.to)
      : e.to === ERRORS || e.to === 'broker/adapters/unix-socket.js' || roomOf(e.to) === 'cache' || roomOf(e.to) === 'attestation' || roomOf(e.to) === roomOf(e.from) ||
        (roomOf(e.from) === 'fronts' && e.to.startsWith('broker/fronts/'));
  assert.deepEqual(edges.filter((e) => !allowed(e)), []);
});

test('nothing in src/broker imports the client or the wiring, except the wiring and the client themselves', () => {
  const edges = brokerEdges().filter((e) => e.to.startsWith('broker/') && e.to !== ERRORS);
  const inner = (room: string) => ['cache', 'adapters', 'attestation'].includes(room) || room.startsWith('fronts');
  assert.deepEqual(edges.filter((e) => inner(roomOf(e.from)) && ['top', 'client'].includes(roomOf(e.to))), []);
});

test('tests and benchmarks import the broker through src/broker/index.ts or a room index', () => {
  const surfaces = new Set(['index', 'cache/index', 'adapters/index', 'attestation/index', 'fronts/index', 'fronts/broker-api/index', 'fronts/istio-ca/index', 'client/index'].map((p) => `src/broker/${p}.js`));
  const imports = repoImportGraph()
    .edges.filter((e) => /^(test|bench)\//u.test(e.from))
    .map((e) => ({ file: e.from, to: target(e) }));
  const broker = imports.filter((i) => i.to.startsWith('src/broker/'));
  assert.ok(broker.length > 30, `${broker.length} broker imports read`);
  assert.deepEqual(broker.filter((i) => !surfaces.has(i.to)).map((i) => `${i.file}: ${relative('.', i.to)}`), []);
});

/** The names `index` (a path relative to src/) exports, following `export * from`. */
function exportedNames(index: string, texts: ReadonlyMap<string, string>): Set<string> {
  const text = texts.get(index) ?? '';
  const names = new Set<string>();
  for (const m of text.matchAll(/^export (?:type )?\{([^}]*)\}/gmu)) {
    for (const part of m[1]!.split(',')) {
      const name = part.trim().replace(/^type\s+/u, '').split(/\s+as\s+/u).pop();
      if (name) names.add(name);
    }
  }
  for (const m of text.matchAll(/^export \* from '([^']+)'/gmu)) {
    for (const n of exportedNames(normalize(join(dirname(index), m[1]!.replace(/\.js$/u, '.ts'))), texts)) names.add(n);
  }
  return names;
}

test("a room imports another room's files directly, but only names that room's index.ts exports", () => {
  const texts = new Map(sourceFiles().map((f) => [f.path, f.text]));
  const indexOf = (room: string) => `broker/${room}/index.ts`;
  const wrong: string[] = [];
  let checked = 0;
  for (const e of repoImportGraph().edges) {
    const path = e.from.replace(/^src\//u, '');
    const to = e.to?.replace(/^src\//u, '');
    if (!e.from.startsWith('src/broker/') || to === undefined || !to.startsWith('broker/') || to.endsWith('/index.ts')) continue;
    const room = roomOf(to);
    if (room === 'top' || room === roomOf(path)) continue;
    const exported = exportedNames(indexOf(room), texts);
    for (const name of e.names.filter((n) => n !== 'default' && n !== '*')) {
      checked++;
      if (!exported.has(name)) wrong.push(`${path}: ${name} from ${to} is not in ${indexOf(room)}`);
    }
  }
  assert.ok(checked > 30, `${checked} imported names checked`);
  assert.deepEqual(wrong, []);
});

test('the broker reaches the CA only through src/ca/index.ts (its authenticator parts, the Istio CA service definition)', () => {
  const edges = brokerEdges().filter((e) => e.to.startsWith('ca/'));
  assert.ok(edges.length >= 3, `${edges.length} imports of src/ca read`);
  assert.deepEqual(edges.filter((e) => e.to !== 'ca/index.js').map((e) => `${e.from} -> ${e.to}`), []);
});
