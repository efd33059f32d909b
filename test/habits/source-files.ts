/** The project's TypeScript sources, for tests that check habits across `src/`. */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from '../support/fixtures.js';

export const SRC_DIR = join(REPO_ROOT, 'src');

export interface SourceFile {
  /** Relative to `src/`, with `/` separators (`ca/ca-server.ts`). */
  readonly path: string;
  readonly text: string;
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []))
    .sort();
}

/** Every `.ts` file under `src/`, sorted by path. */
export function sourceFiles(): SourceFile[] {
  return walk(SRC_DIR).map((abs) => ({ path: relative(SRC_DIR, abs).split('\\').join('/'), text: readFileSync(abs, 'utf8') }));
}

/** The files whose text matches every one of `patterns`. */
export function filesMatching(...patterns: readonly RegExp[]): string[] {
  return sourceFiles()
    .filter((f) => patterns.every((p) => p.test(f.text)))
    .map((f) => f.path);
}
