/**
 * Replacing a file whole, the one way certbroker does it (SVID and CA key files, kubeconfigs,
 * install-cni's binaries and CNI configs on the host): the content goes to a fresh temp file in
 * the same directory, opened O_CREAT|O_EXCL|O_NOFOLLOW with `mode` set explicitly (whatever the
 * umask), optionally fsynced, then renamed over the target (and, when synced, the directory
 * fsynced after the rename). A reader sees the old file or the new
 * one, never half of one; an existing file's mode is never inherited; a symlink at the target or
 * at any temp name is replaced, never written through. Temp names are hidden and carry a marker
 * (`.<name>.certbroker-tmp-<pid>-<random>`), so a crash leaves nothing `removeStaleTemps` cannot
 * find, and nothing a CNI runtime would load as a config.
 */
import { randomBytes } from 'node:crypto';
import { constants, createReadStream, renameSync } from 'node:fs';
import { open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

export const TEMP_MARKER = '.certbroker-tmp-';

export interface AtomicWriteOptions {
  /** The file's permission bits (0600 for secrets, 0644 for configs and certificates). */
  readonly mode: number;
  /** fsync the file before the rename and the directory after it (durable across a crash; slower). */
  readonly sync?: boolean;
  /**
   * Runs synchronously right before the rename, after the temp is complete (and synced); throwing
   * cancels the write (the temp is removed, the error propagates). A compare-and-swap puts its
   * last check here, so nothing but a few syscalls separate the check from the rename.
   */
  readonly beforeRename?: () => void;
}

export function isTempName(name: string): boolean {
  return name.startsWith('.') && name.includes(TEMP_MARKER);
}

function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}${TEMP_MARKER}${process.pid}-${randomBytes(6).toString('hex')}`);
}

/** Opens a fresh temp next to `path`, lets `fill` write it (mode already set), syncs, renames; no temp is left on failure. */
async function replaceVia(path: string, options: AtomicWriteOptions, fill: (fh: FileHandle) => Promise<void>): Promise<void> {
  const tmp = tempPathFor(path);
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, options.mode);
  try {
    await fh.chmod(options.mode); // open()'s mode is filtered by the umask
    await fill(fh);
    if (options.sync) await fh.sync();
    await fh.close();
    if (options.beforeRename) {
      options.beforeRename();
      renameSync(tmp, path); // no event-loop turn between the caller's check and the rename
    } else {
      await rename(tmp, path);
    }
  } catch (err) {
    await fh.close().catch(() => undefined);
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  // The rename lives in the directory: without this a crash can bring back the old file.
  if (options.sync) await syncDirectory(dirname(path));
}

async function syncDirectory(dir: string): Promise<void> {
  const dh = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
}

/** Replaces `path` with `content`, giving the file exactly `options.mode`. */
export async function writeFileAtomic(path: string, content: string | Uint8Array, options: AtomicWriteOptions): Promise<void> {
  await replaceVia(path, options, (fh) => fh.writeFile(content));
}

/**
 * Copies `source` over `path` the same way, and gives the copy `mtimeMs` (the source's, as a
 * rule) so a cheap stat comparison later tells whether the installed file is still ours.
 */
export async function copyFileAtomic(source: string, path: string, options: AtomicWriteOptions & { readonly mtimeMs: number }): Promise<void> {
  await replaceVia(path, options, async (fh) => {
    // Streamed into our own handle (each writeFile continues at the handle's position): the
    // temp keeps the mode set above, not the source's, and a ~100 MB binary is never in memory.
    for await (const chunk of createReadStream(source, { highWaterMark: 1 << 20 })) await fh.writeFile(chunk as Buffer);
    const mtime = new Date(options.mtimeMs);
    await fh.utimes(mtime, mtime);
  });
}

/** Deletes temp files an earlier crash left in `dir`; returns their names. Missing dir: nothing. */
export async function removeStaleTemps(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const stale = names.filter(isTempName);
  await Promise.all(stale.map((n) => unlink(join(dir, n)).catch(() => undefined)));
  return stale;
}
