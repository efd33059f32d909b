/**
 * Atomic file replacement on the host's mounted dirs: write a temp file in the same directory,
 * fsync, rename over the target. A container runtime reading the CNI dir, or kubelet running
 * the plugin, sees either the old file or the new one, never half of one. Temp files carry a
 * recognisable marker so a crash leaves nothing that `removeStaleTemps` cannot find.
 */
import { randomBytes } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { copyFile, chmod, open, readdir, rename, unlink, utimes } from 'node:fs/promises';
import { join } from 'node:path';

export const TEMP_MARKER = '.certbroker-tmp-';

function tempPath(dir: string, name: string): string {
  return join(dir, `.${name}${TEMP_MARKER}${process.pid}-${randomBytes(4).toString('hex')}`);
}

export function isTempName(name: string): boolean {
  return name.startsWith('.') && name.includes(TEMP_MARKER);
}

async function discard(path: string): Promise<void> {
  await unlink(path).catch(() => undefined);
}

type Target = { readonly dir: string; readonly name: string };

/** Runs `fill` on a fresh temp path next to `target`, then renames it over the target; no temp is left on failure. */
async function replaceVia(target: Target, fill: (tmp: string) => Promise<void>): Promise<void> {
  const tmp = tempPath(target.dir, target.name);
  try {
    await fill(tmp);
    await rename(tmp, join(target.dir, target.name));
  } catch (err) {
    await discard(tmp);
    throw err;
  }
}

/** Replaces `target.dir/target.name` with `data`, giving the file `mode`. */
export async function writeFileAtomic(target: Target, data: string | Uint8Array, mode: number): Promise<void> {
  await replaceVia(target, async (tmp) => {
    const handle = await open(tmp, 'wx', mode);
    try {
      await handle.writeFile(data);
      await handle.chmod(mode); // open()'s mode is filtered by the umask
      await handle.sync();
    } finally {
      await handle.close();
    }
  });
}

/**
 * Copies `source` to `dir/name` atomically with `mode`, and gives the copy the source's
 * mtime so a cheap stat comparison tells later whether the installed file is still ours.
 */
export async function copyFileAtomic(
  source: string,
  target: Target,
  attrs: { readonly mode: number; readonly mtimeMs: number },
): Promise<void> {
  await replaceVia(target, async (tmp) => {
    await copyFile(source, tmp, fsConstants.COPYFILE_EXCL);
    await chmod(tmp, attrs.mode);
    const mtime = new Date(attrs.mtimeMs);
    await utimes(tmp, mtime, mtime);
    const handle = await open(tmp, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  });
}

/** Deletes temp files left by an earlier crash; returns their names. Missing dir: nothing. */
export async function removeStaleTemps(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const stale = names.filter(isTempName);
  await Promise.all(stale.map((n) => discard(join(dir, n))));
  return stale;
}

/** unlink that treats "already gone" as success; returns whether a file was removed. */
export async function removeIfPresent(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}
