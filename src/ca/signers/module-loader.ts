/**
 * `--signer module:<path-or-package>`: imports the integrator's ES module and takes its default
 * export as the `SignerModule`. A specifier starting with `./`, `../`, `/` or `file:` is a file,
 * resolved against the working directory; anything else is a package, resolved as an import
 * from certbroker's own installation (the node_modules tree certbroker is installed in). A
 * module that cannot be imported, or whose default export lacks `sign` or `roots`, is
 * ERR_CA_MODULE_LOAD, naming the specifier and what is wrong: `certbroker ca` exits with it.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describeError } from '../../core/errors.js';
import { CaError } from '../errors.js';
import type { SignerModule } from '../signer-module.js';

function loadError(specifier: string, why: string, cause?: unknown): CaError {
  return new CaError('ERR_CA_MODULE_LOAD', `signer module ${JSON.stringify(specifier)}: ${why}`, { status: 'failed-precondition', cause });
}

/** What `import()` is given for `specifier` (a file URL for paths, the specifier itself for packages). */
function moduleImportTarget(specifier: string, cwd: string = process.cwd()): string {
  if (specifier.startsWith('file:')) return specifier;
  if (specifier.startsWith('./') || specifier.startsWith('../') || isAbsolute(specifier)) return pathToFileURL(resolve(cwd, specifier)).href;
  return specifier;
}

export async function loadSignerModule(specifier: string, options: { readonly cwd?: string } = {}): Promise<SignerModule> {
  if (specifier.trim() === '') throw loadError(specifier, 'no module named after "module:"');
  let loaded: { readonly default?: unknown };
  try {
    loaded = (await import(moduleImportTarget(specifier, options.cwd))) as { readonly default?: unknown };
  } catch (err) {
    throw loadError(specifier, `cannot be imported: ${describeError(err)}`, err);
  }
  const candidate = loaded.default;
  if (typeof candidate !== 'object' || candidate === null) throw loadError(specifier, 'has no default export object (export default { roots, sign, ... })');
  const m = candidate as Partial<Record<keyof SignerModule, unknown>>;
  const problems: string[] = [];
  if (typeof m.sign !== 'function') problems.push('sign is not a function');
  if (typeof m.roots !== 'function') problems.push('roots is not a function');
  for (const hook of ['start', 'close', 'notReadyReason'] as const) {
    if (m[hook] !== undefined && typeof m[hook] !== 'function') problems.push(`${hook} is not a function`);
  }
  if (m.description !== undefined && typeof m.description !== 'string') problems.push('description is not a string');
  if (problems.length > 0) throw loadError(specifier, `default export is not a SignerModule: ${problems.join('; ')}`);
  return candidate as SignerModule;
}
