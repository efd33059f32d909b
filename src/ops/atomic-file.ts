/**
 * Writing a secret-bearing file safely: `content` goes to a random temp name in the same
 * directory, opened O_CREAT|O_EXCL|O_NOFOLLOW with `mode` set explicitly (whatever the umask),
 * then renamed over `path`. An existing file's mode is never inherited, and a symlink at `path`
 * or at a guessable temp name is replaced, never written through.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';

export interface AtomicWriteOptions {
  readonly mode: number;
  /** fsync before the rename (durable across a crash; slower). */
  readonly sync?: boolean;
}

export async function writeFileAtomic(path: string, content: string | Uint8Array, options: AtomicWriteOptions): Promise<void> {
  const tmp = `${path}.${randomBytes(8).toString('hex')}.tmp`;
  const fh = await open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, options.mode);
  try {
    await fh.chmod(options.mode);
    await fh.writeFile(content);
    if (options.sync) await fh.sync();
    await fh.close();
    await rename(tmp, path);
  } catch (err) {
    await fh.close().catch(() => undefined);
    await rm(tmp, { force: true });
    throw err;
  }
}
