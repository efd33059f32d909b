/**
 * Directories certbroker makes for itself — the broker's socket directories, `certbroker fetch
 * --out-dir`, `certbroker certs --out-dir`, the devcluster's kubeconfig directory, the scratch
 * directory of `certbroker start` — are owner-only (0700) whatever the umask. mkdir's mode is
 * filtered by the umask, so each directory that did not exist is created with 0700 (which no umask
 * can widen) and then chmod-ed to exactly 0700 (which a umask that strips owner bits cannot
 * narrow). A directory that already existed keeps its mode: it belongs to someone else (a hostPath
 * mount, /tmp, a directory an operator prepared).
 */
import { chmodSync, mkdirSync } from 'node:fs';
import { chmod, mkdir } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';

export const PRIVATE_DIR_MODE = 0o700;

/** The directories from `first` (the first one mkdir created) down to `dir`. */
function createdChain(first: string | undefined, dir: string): string[] {
  if (first === undefined) return [];
  const rest = relative(first, dir);
  const chain = [first];
  let at = first;
  for (const part of rest === '' ? [] : rest.split(sep)) {
    at = join(at, part);
    chain.push(at);
  }
  return chain;
}

/** Creates `dir` and its missing parents as 0700 directories; returns the directories it created. */
export function ensurePrivateDirSync(path: string): string[] {
  const dir = resolve(path);
  const created = createdChain(mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE }), dir);
  for (const d of created) chmodSync(d, PRIVATE_DIR_MODE);
  return created;
}

/** Creates `dir` and its missing parents as 0700 directories; returns the directories it created. */
export async function ensurePrivateDir(path: string): Promise<string[]> {
  const dir = resolve(path);
  const created = createdChain(await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE }), dir);
  for (const d of created) await chmod(d, PRIVATE_DIR_MODE);
  return created;
}
