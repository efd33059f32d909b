/**
 * The module specifiers a tree of JavaScript files imports, read from the syntax tree (TypeScript's
 * own parser, through the compiler API that `typescript` ships) rather than matched by a pattern,
 * so a string such as `a JSON patch "from" must be a string` is text, not an import.
 *
 * Counted: `import … from 'x'`, `import 'x'`, `export … from 'x'`, `import('x')` and `require('x')`
 * (also a `require` made by `createRequire`). A dynamic `import()` or `require()` whose argument is
 * not a string literal cannot be checked; it is reported as `computed` so a caller can refuse it.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { API } from 'typescript/unstable/sync';
import { SyntaxKind, type Node } from 'typescript/unstable/ast';
import { removeTempDirSync, tempDirSync } from '../support/scratch.js';

export interface ImportSite {
  /** The file, as the compiler names it (an absolute path). */
  readonly file: string;
  /** 1-based line of the import. */
  readonly line: number;
  /** The module specifier, or undefined when the argument is computed. */
  readonly specifier: string | undefined;
}

function literalText(node: Node | undefined): string | undefined {
  if (node === undefined) return undefined;
  if (node.kind !== SyntaxKind.StringLiteral && node.kind !== SyntaxKind.NoSubstitutionTemplateLiteral) return undefined;
  return (node as Node & { readonly text: string }).text;
}

/** Every import site in the `.js` files under `root` (recursively). */
export function jsImports(root: string): ImportSite[] {
  const work = tempDirSync('js-imports-');
  const api = new API({ cwd: work });
  try {
    const tsconfig = join(work, 'tsconfig.json');
    writeFileSync(
      tsconfig,
      JSON.stringify({
        compilerOptions: { allowJs: true, noEmit: true, noResolve: true, types: [], module: 'nodenext', target: 'es2022' },
        include: [join(root, '**', '*.js')],
      }),
    );
    const project = api.updateSnapshot({ openProject: tsconfig }).getProjects()[0];
    if (!project) throw new Error(`${tsconfig} did not open as a project`);
    const sites: ImportSite[] = [];
    for (const file of project.program.getSourceFileNames()) {
      if (!file.startsWith(`${root}/`) || !file.endsWith('.js')) continue;
      const sf = project.program.getSourceFile(file);
      if (!sf) throw new Error(`${file}: not parsed`);
      const at = (node: Node, specifier: string | undefined) =>
        sites.push({ file, line: sf.getLineAndCharacterOfPosition(node.pos + (/^\s*/u.exec(sf.text.slice(node.pos))?.[0].length ?? 0)).line + 1, specifier });
      const visit = (node: Node): void => {
        if (node.kind === SyntaxKind.ImportDeclaration || node.kind === SyntaxKind.ExportDeclaration) {
          const spec = (node as Node & { readonly moduleSpecifier?: Node }).moduleSpecifier;
          if (spec) at(node, literalText(spec));
        } else if (node.kind === SyntaxKind.CallExpression) {
          const call = node as Node & { readonly expression: Node & { readonly text?: string }; readonly arguments: readonly Node[] };
          const callee = call.expression;
          if (callee.kind === SyntaxKind.ImportKeyword || (callee.kind === SyntaxKind.Identifier && callee.text === 'require')) at(node, literalText(call.arguments[0]));
        }
        node.forEachChild(visit);
      };
      sf.forEachChild(visit);
    }
    return sites;
  } finally {
    api.close();
    removeTempDirSync(work);
  }
}

/** The package a bare specifier names (`@grpc/grpc-js/build/x` -> `@grpc/grpc-js`), or undefined for relative/`node:` ones. */
export function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  return specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
}
