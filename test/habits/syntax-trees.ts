/**
 * Source files read with TypeScript's own parser (the compiler API that `typescript` ships), and
 * the import sites in them: the one source reader of the habit tests (import-graph.ts,
 * source-limits.test.ts, test/deploy/js-imports.ts), so a string such as
 * `a JSON patch "from" must be a string` is text, not an import.
 */
import { dirname } from 'node:path';
import { API } from 'typescript/unstable/sync';
import { SyntaxKind, type Node, type SourceFile } from 'typescript/unstable/ast';

export type { Node, SourceFile } from 'typescript/unstable/ast';

/** Opens `tsconfig` as a project and calls `each` with the syntax tree of every program file `keep` accepts. */
export function forEachSyntaxTree(tsconfig: string, keep: (fileName: string) => boolean, each: (sf: SourceFile, fileName: string) => void): void {
  const api = new API({ cwd: dirname(tsconfig) });
  try {
    const project = api.updateSnapshot({ openProject: tsconfig }).getProjects()[0];
    if (!project) throw new Error(`${tsconfig} did not open as a project`);
    for (const fileName of project.program.getSourceFileNames()) {
      if (!keep(fileName)) continue;
      const sf = project.program.getSourceFile(fileName);
      if (!sf) throw new Error(`${fileName}: not parsed`);
      each(sf, fileName);
    }
  } finally {
    api.close();
  }
}

/** Where `node`'s first token starts: its `pos` counts the blank lines and comments before it. */
export function firstTokenPos(sf: SourceFile, node: Node): number {
  return node.pos + (/^\s*(?:(?:\/\/[^\n]*|\/\*[\s\S]*?\*\/)\s*)*/u.exec(sf.text.slice(node.pos, node.end))?.[0].length ?? 0);
}

/** The 0-based line of a position. */
export function lineOf(sf: SourceFile, pos: number): number {
  return sf.getLineAndCharacterOfPosition(pos).line;
}

/** The text of a string literal (or a template without substitutions); undefined for anything else. */
export function literalText(node: Node | undefined): string | undefined {
  if (node === undefined) return undefined;
  if (node.kind !== SyntaxKind.StringLiteral && node.kind !== SyntaxKind.NoSubstitutionTemplateLiteral) return undefined;
  return (node as Node & { readonly text: string }).text;
}

export interface ImportSiteNode {
  /** The import/export declaration, or the `import()` / `require()` call. */
  readonly node: Node;
  /** 1-based line of its first token. */
  readonly line: number;
  /** The module specifier; undefined when the argument of a call is computed. */
  readonly specifier: string | undefined;
  /** An `import()` or `require()` call rather than a declaration. */
  readonly dynamic: boolean;
}

/**
 * The import sites of a file: `import … from 'x'`, `import 'x'`, `export … from 'x'`, `import('x')`,
 * and with `require` set also `require('x')` (a `require` made by `createRequire` too).
 */
export function importSites(sf: SourceFile, options: { readonly require?: boolean } = {}): ImportSiteNode[] {
  const sites: ImportSiteNode[] = [];
  const at = (node: Node, specifier: string | undefined, dynamic: boolean) =>
    sites.push({ node, line: lineOf(sf, firstTokenPos(sf, node)) + 1, specifier, dynamic });
  const visit = (node: Node): void => {
    if (node.kind === SyntaxKind.ImportDeclaration || node.kind === SyntaxKind.ExportDeclaration) {
      const spec = (node as Node & { readonly moduleSpecifier?: Node }).moduleSpecifier;
      if (spec) at(node, literalText(spec), false);
    } else if (node.kind === SyntaxKind.CallExpression) {
      const call = node as Node & { readonly expression: Node & { readonly text?: string }; readonly arguments: readonly Node[] };
      const callee = call.expression;
      const isRequire = options.require === true && callee.kind === SyntaxKind.Identifier && callee.text === 'require';
      if (callee.kind === SyntaxKind.ImportKeyword || isRequire) at(node, literalText(call.arguments[0]), true);
    }
    node.forEachChild(visit);
  };
  sf.forEachChild(visit);
  return sites;
}
