/**
 * The import rules of the rooms (issue 11), read from the "Source layout" table of
 * docs/architecture.md, so the table and the code cannot drift apart: each room imports only its
 * own files, the rooms its row allows, the npm packages its row lists, and Node's builtins.
 * Imports are read from the syntax tree (import-graph.ts: TypeScript's own parser), type-only
 * imports included (a type names a dependency as much as a value does).
 *
 * Besides the table: the allowed room graph has no cycle; the domain files (plain TypeScript over
 * plain data) reach, through everything they import, no gRPC, protobufjs, Kubernetes, filesystem,
 * child process, socket or worker code and no file outside the domain and `core`; the CNI plugin
 * and istio-iptables load no Kubernetes client, gRPC or protobufjs at run time, even transitively.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../support/fixtures.js';
import { SRC_DIR, sourceFiles } from './source-files.js';
import { importGraph, type ImportEdge } from './import-graph.js';

interface RoomRule {
  readonly room: string;
  /** Rooms it may import; undefined: any room ("everything"). */
  readonly rooms: readonly string[] | undefined;
  readonly packages: readonly string[];
}

/** `a`, `b` out of a table cell of backticked names; "nothing"/"none" is empty, "everything" undefined. */
function names(cell: string): string[] | undefined {
  const text = cell.trim();
  if (text === 'everything') return undefined;
  if (text === 'nothing' || text === 'none') return [];
  const found = [...text.matchAll(/`([^`]+)`/gu)].map((m) => m[1]!);
  assert.ok(found.length > 0, `a cell of backticked names, "nothing", "none" or "everything": ${JSON.stringify(text)}`);
  return found;
}

/** The rows of the "Source layout" table: room, what it holds, may import, packages. */
function tableRules(): RoomRule[] {
  const doc = readFileSync(join(REPO_ROOT, 'docs/architecture.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Source layout'), doc.indexOf('\n## ', doc.indexOf('## Source layout') + 1));
  const rows = section.split('\n').filter((l) => /^\| `[^`]+` \|/u.test(l));
  return rows.map((row) => {
    // Cells never contain a pipe of their own; split on the column separators.
    const cells = row.split(/ \| /u);
    assert.equal(cells.length, 4, `four columns: ${row.slice(0, 80)}`);
    const room = /^\| `([^`]+)`$/u.exec(cells[0]!)?.[1];
    assert.ok(room, row.slice(0, 80));
    return { room, rooms: names(cells[2]!), packages: names(cells[3]!.replace(/ \|$/u, '')) ?? [] };
  });
}

/** The room of a src/ path: `cni/<part>` under src/cni, `index.ts` for the package entry, else the first folder. */
function roomOf(path: string): string {
  const parts = path.split('/');
  if (parts.length === 1) return path;
  if (parts[0] === 'cni') return `cni/${parts[1]}`;
  return parts[0]!;
}

const RULES = tableRules();
const RULE = new Map(RULES.map((r) => [r.room, r]));
const { edges: EDGES, computed: COMPUTED } = importGraph();
const FILES = sourceFiles().map((f) => f.path);
const where = (e: ImportEdge) => `${e.from}:${e.line} imports ${e.specifier}`;

test('the Source layout table names every room of src/ once, and only rooms that exist', () => {
  const rooms = new Set(FILES.map(roomOf));
  assert.ok(rooms.size >= 15, `${rooms.size} rooms read`);
  assert.deepEqual([...RULE.keys()].sort(), [...rooms].sort());
  assert.equal(RULE.size, RULES.length, 'no room twice');
  for (const r of RULES) for (const dep of r.rooms ?? []) assert.ok(RULE.has(dep), `${r.room} may import ${dep}: not a room`);
  for (const r of RULES) assert.ok(existsSync(join(SRC_DIR, r.room)), r.room);
});

test('each room imports only its own files and the rooms its row allows (no upward imports)', () => {
  assert.ok(EDGES.length > 1000, `${EDGES.length} imports read`);
  const wrong = EDGES.filter((e) => e.to !== undefined).filter((e) => {
    const from = roomOf(e.from);
    const to = roomOf(e.to!);
    if (from === to) return false;
    const allowed = RULE.get(from)!.rooms;
    return allowed !== undefined && !allowed.includes(to);
  });
  // The one file of pki that writes files uses ops' helpers for it (the table says so).
  const pkiWriter = (e: ImportEdge) => e.from === 'pki/cacerts-dir.ts' && ['ops/atomic-file.ts', 'ops/private-dir.ts'].includes(e.to!);
  assert.deepEqual(wrong.filter((e) => !pkiWriter(e)).map(where), []);
  assert.ok(EDGES.some(pkiWriter), 'the pki exception still names a real import (drop it from the table when it goes)');
});

test('each room imports only the npm packages its row lists', () => {
  const wrong = EDGES.filter((e) => e.pkg !== undefined && !e.pkg.startsWith('node:') && !RULE.get(roomOf(e.from))!.packages.includes(e.pkg));
  assert.deepEqual(wrong.map(where), []);
  // And every listed package is used there: the table says what the room really depends on.
  for (const r of RULES) {
    const used = new Set(EDGES.filter((e) => roomOf(e.from) === r.room && e.pkg !== undefined).map((e) => e.pkg));
    assert.deepEqual(r.packages.filter((p) => !used.has(p)), [], `${r.room} lists packages it does not import`);
  }
});

test('the allowed room graph has no cycle', () => {
  const visiting = new Set<string>();
  const done = new Set<string>();
  const visit = (room: string, path: string[]): void => {
    if (done.has(room)) return;
    assert.ok(!visiting.has(room), `cycle: ${[...path, room].join(' -> ')}`);
    visiting.add(room);
    for (const dep of RULE.get(room)!.rooms ?? []) visit(dep, [...path, room]);
    visiting.delete(room);
    done.add(room);
  };
  for (const r of RULES) visit(r.room, []);
});

test('a computed import() (whose target the rules cannot see) is only the CLI loading its subcommands and the CA loading a signer module', () => {
  // module-loader.ts imports the integrator's module named by `--signer module:<path-or-package>`: outside the repository, so outside the rules.
  assert.deepEqual(COMPUTED.map((c) => c.from), ['ca/signers/module-loader.ts', 'cli/main.ts']);
});

/** Plain TypeScript over plain data (docs/architecture.md, "Source layout"). A folder entry ends in `/`. */
const DOMAIN = [
  'spiffe/',
  'pki/',
  'broker/cache/',
  'broker/errors.ts',
  'ca/caller.ts',
  'ca/node-authorizer.ts',
  'ca/recent-map.ts',
  'ca/pod-index.ts',
  'ca/errors.ts',
  'cni/iptables/addresses.ts',
  'cni/iptables/capture.ts',
  'cni/iptables/config.ts',
  'cni/iptables/errors.ts',
  'cni/iptables/plan.ts',
  'cni/iptables/rule-set.ts',
  'cni/install/conflist.ts',
  'cni/install/errors.ts',
  'cni/install/fight-detector.ts',
  'cni/install/json.ts',
  'cni/install/plugin-entry.ts',
  'cni/install/primary-config.ts',
  'cni/install/upgrade-policy.ts',
];
/** Adapters inside a domain folder: pki's file writer, its worker pool and the surface that exports them. */
const NOT_DOMAIN = ['pki/cacerts-dir.ts', 'pki/leaf-pool.ts', 'pki/leaf-worker.ts', 'pki/index.ts'];
const isDomain = (path: string) => !NOT_DOMAIN.includes(path) && DOMAIN.some((d) => (d.endsWith('/') ? path.startsWith(d) : path === d));
/** What domain code never reaches: transports, Kubernetes, the filesystem, processes, threads. */
const NOT_IN_DOMAIN = /^(?:@grpc\/|@kubernetes\/|protobufjs$|node:(?:fs|child_process|net|http|https|http2|tls|dgram|worker_threads|cluster)(?:\/|$))/u;
/** node:net's address parsers are plain functions over strings; its sockets are not. */
const ADDRESS_PARSERS = ['isIP', 'isIPv4', 'isIPv6'];
const forbiddenInDomain = (e: ImportEdge) =>
  NOT_IN_DOMAIN.test(e.pkg!) && !(e.pkg === 'node:net' && e.names.length > 0 && e.names.every((n) => ADDRESS_PARSERS.includes(n)));

/** Every edge reachable from `start` through src/ files (`runtimeOnly`: not through type-only imports). */
function closure(start: string, runtimeOnly: boolean): ImportEdge[] {
  const byFile = new Map<string, ImportEdge[]>();
  for (const e of EDGES) byFile.set(e.from, [...(byFile.get(e.from) ?? []), e]);
  const seen = new Set<string>([start]);
  const out: ImportEdge[] = [];
  const queue = [start];
  while (queue.length > 0) {
    for (const e of byFile.get(queue.shift()!) ?? []) {
      if (runtimeOnly && e.typeOnly) continue;
      out.push(e);
      if (e.to !== undefined && !seen.has(e.to)) {
        seen.add(e.to);
        queue.push(e.to);
      }
    }
  }
  return out;
}

test('domain files reach no gRPC, Kubernetes, filesystem, process or socket code, and no file outside the domain and core', () => {
  const files = FILES.filter(isDomain);
  assert.ok(files.length > 40, `${files.length} domain files`);
  for (const d of DOMAIN) assert.ok(files.some((f) => (d.endsWith('/') ? f.startsWith(d) : f === d)), `${d} is a domain file (or folder) that exists`);
  const wrong = files.flatMap((f) =>
    closure(f, false)
      .filter((e) => (e.pkg !== undefined ? forbiddenInDomain(e) : !isDomain(e.to!) && roomOf(e.to!) !== 'core'))
      .map((e) => `${f}: ${where(e)}`),
  );
  assert.deepEqual([...new Set(wrong)], []);
});

test('the CNI plugin and istio-iptables load no Kubernetes client, gRPC or protobufjs, even transitively', () => {
  const heavy = /^(?:@kubernetes\/|@grpc\/|protobufjs$)/u;
  const files = FILES.filter((f) => f.startsWith('cni/plugin/') || f.startsWith('cni/iptables/'));
  assert.ok(files.length > 20, `${files.length} files`);
  const wrong = files.flatMap((f) => closure(f, true).filter((e) => e.pkg !== undefined && heavy.test(e.pkg)).map((e) => `${f}: ${where(e)}`));
  assert.deepEqual([...new Set(wrong)], []);
});
