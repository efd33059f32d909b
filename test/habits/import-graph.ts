/**
 * The import graph of src/, read from the syntax tree (TypeScript's own parser, through the
 * compiler API that `typescript` ships), for the layering rules of test/habits/layering.test.ts.
 *
 * Counted: `import … from 'x'`, `import 'x'`, `export … from 'x'` and `import('x')` (dynamic
 * imports are how the CLI loads a subcommand lazily, and still a dependency). An import or
 * export whose every name is a type (`import type`, `export type`, or `{ type A, type B }`) is
 * marked `typeOnly`: it shapes the code but loads nothing at run time. A dynamic import whose
 * argument is not a string literal cannot be followed; it is listed in `computed`.
 */
import { dirname, join, normalize, relative } from 'node:path';
import { API } from 'typescript/unstable/sync';
import { SyntaxKind, type Node } from 'typescript/unstable/ast';
import { REPO_ROOT } from '../support/fixtures.js';
import { SRC_DIR } from './source-files.js';

export interface ImportEdge {
  /** The importing file, relative to src/ (`cni/plugin/plugin.ts`). */
  readonly from: string;
  readonly line: number;
  /** The specifier as written. */
  readonly specifier: string;
  /** A src/ file (relative to src/, `.ts`) for a relative specifier; undefined for a package or `node:` module. */
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

function literalText(node: Node | undefined): string | undefined {
  if (node === undefined) return undefined;
  if (node.kind !== SyntaxKind.StringLiteral && node.kind !== SyntaxKind.NoSubstitutionTemplateLiteral) return undefined;
  return (node as Node & { readonly text: string }).text;
}

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

/** Resolves a relative specifier of `from` (relative to src/) to a src/ `.ts` path. */
function resolveRelative(from: string, specifier: string): string {
  const joined = normalize(join(dirname(from), specifier)).split('\\').join('/');
  return joined.replace(/\.js$/u, '.ts');
}

export interface ImportGraph {
  readonly edges: readonly ImportEdge[];
  /** Dynamic imports with a computed argument: `{ from, line }`. */
  readonly computed: ReadonlyArray<{ readonly from: string; readonly line: number }>;
}

let cached: ImportGraph | undefined;

/** Every import edge of every src/ file of the project (tsconfig.json), parsed once per process. */
export function importGraph(): ImportGraph {
  if (cached) return cached;
  const api = new API({ cwd: REPO_ROOT });
  try {
    const project = api.updateSnapshot({ openProject: join(REPO_ROOT, 'tsconfig.json') }).getProjects()[0];
    if (!project) throw new Error('tsconfig.json did not open as a project');
    const edges: ImportEdge[] = [];
    const computed: Array<{ from: string; line: number }> = [];
    for (const fileName of project.program.getSourceFileNames()) {
      if (!fileName.startsWith(`${SRC_DIR}/`)) continue;
      const sf = project.program.getSourceFile(fileName);
      if (!sf) throw new Error(`${fileName}: not parsed`);
      const from = relative(SRC_DIR, fileName).split('\\').join('/');
      const add = (node: Node, specifier: string | undefined, typeOnly: boolean, dynamic: boolean, names: string[] = []) => {
        const line = sf.getLineAndCharacterOfPosition(node.pos + (/^\s*/u.exec(sf.text.slice(node.pos))?.[0].length ?? 0)).line + 1;
        if (specifier === undefined) {
          computed.push({ from, line });
          return;
        }
        const local = specifier.startsWith('.');
        edges.push({
          from,
          line,
          specifier,
          to: local ? resolveRelative(from, specifier) : undefined,
          pkg: local ? undefined : packageOf(specifier),
          typeOnly,
          dynamic,
          names,
        });
      };
      const visit = (node: Node): void => {
        if (node.kind === SyntaxKind.ImportDeclaration || node.kind === SyntaxKind.ExportDeclaration) {
          const spec = (node as Node & { readonly moduleSpecifier?: Node }).moduleSpecifier;
          if (spec) add(node, literalText(spec), isTypeOnly(node), false, importedNames(node));
        } else if (node.kind === SyntaxKind.CallExpression) {
          const call = node as Node & { readonly expression: Node; readonly arguments: readonly Node[] };
          if (call.expression.kind === SyntaxKind.ImportKeyword) add(node, literalText(call.arguments[0]), false, true);
        }
        node.forEachChild(visit);
      };
      sf.forEachChild(visit);
    }
    cached = { edges, computed };
    return cached;
  } finally {
    api.close();
  }
}
