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
import { removeTempDirSync, tempDirSync } from '../support/scratch.js';
import { forEachSyntaxTree, importSites } from '../habits/syntax-trees.js';

export interface ImportSite {
  /** The file, as the compiler names it (an absolute path). */
  readonly file: string;
  /** 1-based line of the import. */
  readonly line: number;
  /** The module specifier, or undefined when the argument is computed. */
  readonly specifier: string | undefined;
}

/** Every import site in the `.js` files under `root` (recursively). */
export function jsImports(root: string): ImportSite[] {
  const work = tempDirSync('js-imports-');
  try {
    const tsconfig = join(work, 'tsconfig.json');
    writeFileSync(
      tsconfig,
      JSON.stringify({
        compilerOptions: { allowJs: true, noEmit: true, noResolve: true, types: [], module: 'nodenext', target: 'es2022' },
        include: [join(root, '**', '*.js')],
      }),
    );
    const sites: ImportSite[] = [];
    forEachSyntaxTree(
      tsconfig,
      (file) => file.startsWith(`${root}/`) && file.endsWith('.js'),
      (sf, file) => sites.push(...importSites(sf, { require: true }).map(({ line, specifier }) => ({ file, line, specifier }))),
    );
    return sites;
  } finally {
    removeTempDirSync(work);
  }
}

/** The package a bare specifier names (`@grpc/grpc-js/build/x` -> `@grpc/grpc-js`), or undefined for relative/`node:` ones. */
export function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  return specifier.split('/').slice(0, specifier.startsWith('@') ? 2 : 1).join('/');
}
