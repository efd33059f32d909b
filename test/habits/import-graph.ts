/**
 * The import graph of src/ (and of the whole project: tests and benchmarks too), read from the
 * syntax tree (./syntax-trees.ts), for the layering and room-surface rules of test/habits/.
 *
 * Counted: `import … from 'x'`, `import 'x'`, `export … from 'x'` and `import('x')` (dynamic
 * imports are how the CLI loads a subcommand lazily, and still a dependency). An import or
 * export whose every name is a type (`import type`, `export type`, or `{ type A, type B }`) is
 * marked `typeOnly`: it shapes the code but loads nothing at run time. A dynamic import whose
 * argument is not a string literal cannot be followed; it is listed in `computed`.
 */
import { dirname, join, normalize, relative } from 'node:path';
import { SyntaxKind } from 'typescript/unstable/ast';
import { REPO_ROOT } from '../support/fixtures.js';
import { SRC_DIR } from './source-files.js';
import { forEachSyntaxTree, importSites, type ImportSiteNode, type Node } from './syntax-trees.js';

export interface ImportEdge {
  /** The importing file, relative to src/ (`cni/plugin/plugin.ts`; `repoImportGraph`: to the repository). */
  readonly from: string;
  readonly line: number;
  /** The specifier as written. */
  readonly specifier: string;
  /** The file a relative specifier names (relative like `from`, `.ts`); undefined for a package or `node:` module. */
  readonly to: string | undefined;
  /** The package a bare specifier names (`@grpc/grpc-js`), `node:x` for a builtin; undefined for a src/ file. */
  readonly pkg: string | undefined;
  readonly typeOnly: boolean;
  readonly dynamic: boolean;
  /**
   * The names a static import binds, as exported (`{ isIP as ip }` -> `isIP`); `default` and `*`
   * for default and namespace imports; empty for `import 'x'`, an export-from or `import()`.
   */
  readonly names: readonly string[];
}

type Named = Node & { readonly isTypeOnly?: boolean };
type WithClause = Node & {
  readonly isTypeOnly?: boolean;
  readonly name?: Node;
  readonly namedBindings?: Node & { readonly elements?: readonly Named[] };
};

/** Whether an import/export declaration brings in types only. */
function isTypeOnly(node: Node): boolean {
  if (node.kind === SyntaxKind.ImportDeclaration) {
    const clause = (node as Node & { readonly importClause?: WithClause }).importClause;
    if (clause === undefined) return false; // `import 'x'`: run for its effects
    if (clause.isTypeOnly) return true;
    if (clause.name !== undefined) return false; // a default import is a value
    const elements = clause.namedBindings?.elements;
    return elements !== undefined && elements.length > 0 && elements.every((e) => e.isTypeOnly === true);
  }
  const exp = node as Node & { readonly isTypeOnly?: boolean; readonly exportClause?: Node & { readonly elements?: readonly Named[] } };
  if (exp.isTypeOnly) return true;
  const elements = exp.exportClause?.elements;
  return elements !== undefined && elements.length > 0 && elements.every((e) => e.isTypeOnly === true);
}

function nodeText(node: Node | undefined): string | undefined {
  return (node as (Node & { readonly text?: string }) | undefined)?.text;
}

/** The exported names an import declaration binds (see ImportEdge.names). */
function importedNames(node: Node): string[] {
  if (node.kind !== SyntaxKind.ImportDeclaration) return [];
  const clause = (node as Node & { readonly importClause?: WithClause }).importClause;
  if (clause === undefined) return [];
  const out: string[] = [];
  if (clause.name !== undefined) out.push('default');
  const bindings = clause.namedBindings as (Node & { readonly elements?: ReadonlyArray<Node & { readonly name: Node; readonly propertyName?: Node }> }) | undefined;
  if (bindings?.kind === SyntaxKind.NamespaceImport) out.push('*');
  for (const e of bindings?.elements ?? []) out.push(nodeText(e.propertyName ?? e.name) ?? '?');
  return out;
}

function packageOf(specifier: string): string {
  if (specifier.startsWith('node:')) return specifier;
  return specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
}

/** Resolves a relative specifier of `from` to a `.ts` path relative to the same root. */
function resolveRelative(from: string, specifier: string): string {
  const joined = normalize(join(dirname(from), specifier)).split('\\').join('/');
  return joined.replace(/\.js$/u, '.ts');
}

export interface ImportGraph {
  readonly edges: readonly ImportEdge[];
  /** Dynamic imports with a computed argument: `{ from, line }`. */
  readonly computed: ReadonlyArray<{ readonly from: string; readonly line: number }>;
}

function edgesOf(from: string, sites: readonly ImportSiteNode[], graph: { edges: ImportEdge[]; computed: Array<{ from: string; line: number }> }): void {
  for (const { node, line, specifier, dynamic } of sites) {
    if (specifier === undefined) {
      graph.computed.push({ from, line });
      continue;
    }
    const local = specifier.startsWith('.');
    graph.edges.push({
      from,
      line,
      specifier,
      to: local ? resolveRelative(from, specifier) : undefined,
      pkg: local ? undefined : packageOf(specifier),
      typeOnly: !dynamic && isTypeOnly(node),
      dynamic,
      names: dynamic ? [] : importedNames(node),
    });
  }
}

let cachedRepo: ImportGraph | undefined;
let cachedSrc: ImportGraph | undefined;

/**
 * Every import edge of every file of the project (tsconfig.json: src/, test/ and bench/), `from`
 * and `to` relative to the repository (`test/ca/x.test.ts` -> `src/ca/index.ts`), parsed once per process.
 */
export function repoImportGraph(): ImportGraph {
  if (cachedRepo) return cachedRepo;
  const graph = { edges: [] as ImportEdge[], computed: [] as Array<{ from: string; line: number }> };
  forEachSyntaxTree(
    join(REPO_ROOT, 'tsconfig.json'),
    (fileName) => fileName.startsWith(`${REPO_ROOT}/`) && !fileName.includes('/node_modules/'),
    (sf, fileName) => edgesOf(relative(REPO_ROOT, fileName).split('\\').join('/'), importSites(sf), graph),
  );
  cachedRepo = graph;
  return cachedRepo;
}

/** Every import edge of every src/ file of the project, `from` and `to` relative to src/ (`cni/plugin/plugin.ts`). */
export function importGraph(): ImportGraph {
  if (cachedSrc) return cachedSrc;
  const inSrc = (path: string) => relative(SRC_DIR, join(REPO_ROOT, path)).split('\\').join('/');
  const repo = repoImportGraph();
  cachedSrc = {
    edges: repo.edges.filter((e) => e.from.startsWith('src/')).map((e) => ({ ...e, from: inSrc(e.from), to: e.to === undefined ? undefined : inSrc(e.to) })),
    computed: repo.computed.filter((c) => c.from.startsWith('src/')).map((c) => ({ ...c, from: inSrc(c.from) })),
  };
  return cachedSrc;
}
