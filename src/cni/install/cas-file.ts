/**
 * Compare-and-swap on a file another component also writes (the primary CNI's config).
 *
 * `readVersion` reads a file once, consistently: its text together with the identity of the inode
 * it came from (inode, size, mtime and ctime in ns). `replaceIfUnchanged` writes the new content to
 * a temp file and, right before renaming it over the target, checks that the target is still that
 * version: the same inode at the path (another writer's rename gives a new inode), the same size
 * and times, and the same bytes when read again (an in-place rewrite within one timestamp tick
 * keeps the times). Any difference is a conflict: nothing is written and the caller reads again.
 *
 * What a rename cannot close: a writer whose own rename lands in the few microseconds between the
 * last check and ours is overwritten (Linux's RENAME_EXCHANGE would hand its file back, but Node
 * has no binding for it). A writer that opened the file before our rename and writes into it
 * after (truncate + write) writes into the inode we just replaced; that one is caught: the
 * replaced inode is re-read after the rename, and what was written into it is returned as
 * `overwritten` for the caller to apply on top.
 */
import { closeSync, constants, fstatSync, openSync, readSync, statSync, unlinkSync, type BigIntStats } from 'node:fs';
import { open } from 'node:fs/promises';
import { writeFileAtomic } from '../../ops/atomic-file.js';

/** One version of a file: its text and the inode it was read from. */
export interface FileVersion {
  readonly text: string;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  /** Permission bits (and setuid/setgid/sticky). */
  readonly mode: number;
}

export type CasResult =
  | {
      readonly kind: 'swapped';
      /**
       * Text another writer put into the file we replaced while we replaced it (it opened the file
       * before our rename and wrote after): its latest content, no longer on disk.
       */
      readonly overwritten?: string;
    }
  | { readonly kind: 'conflict'; readonly reason: string };

export interface CasOptions {
  readonly mode: number;
  readonly sync?: boolean;
  /** Test hook: runs right before the final check (`before-rename`) and after the rename. */
  readonly onCommit?: (stage: 'before-rename' | 'after-rename', path: string) => void;
}

class Conflict extends Error {}

function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

const MAX_TORN_READS = 5;

function sameStat(st: BigIntStats, v: FileVersion): boolean {
  return st.ino === v.ino && st.size === v.size && st.mtimeNs === v.mtimeNs && st.ctimeNs === v.ctimeNs;
}

/**
 * Reads `path` as one version, or undefined when it is absent or not a regular file. A read
 * that overlaps an in-place write (the stat moved while reading) is repeated.
 */
export async function readVersion(path: string): Promise<FileVersion | undefined> {
  for (let attempt = 0; ; attempt++) {
    let fh;
    try {
      fh = await open(path, constants.O_RDONLY);
    } catch (err) {
      if (['ENOENT', 'ENOTDIR', 'ELOOP', 'EISDIR'].includes(errno(err) ?? '')) return undefined;
      throw err;
    }
    try {
      const before = await fh.stat({ bigint: true });
      if (!before.isFile()) return undefined;
      const text = await fh.readFile('utf8');
      const after = await fh.stat({ bigint: true });
      const version: FileVersion = {
        text,
        ino: after.ino,
        size: after.size,
        mtimeNs: after.mtimeNs,
        ctimeNs: after.ctimeNs,
        mode: Number(after.mode & 0o7777n),
      };
      if ((sameStat(before, version) && BigInt(Buffer.byteLength(text)) === after.size) || attempt >= MAX_TORN_READS) return version;
    } finally {
      await fh.close();
    }
  }
}

/** The bytes behind `fd`, read from offset 0. */
function readAll(fd: number): string {
  const size = Number(fstatSync(fd).size);
  const buf = Buffer.alloc(size);
  let off = 0;
  while (off < size) {
    const n = readSync(fd, buf, off, size - off, off);
    if (n === 0) break;
    off += n;
  }
  return buf.subarray(0, off).toString('utf8');
}

/**
 * Throws Conflict unless `path` is still `expected` or, for 'absent', does not exist. The inode
 * is checked through `fd` (opened on it) first, its bytes included; the path lookup comes last, so
 * the last thing before the rename is the cheapest check, the one a writer's rename would fail.
 * Symlinks are followed, as a runtime reading the config does (the rename then replaces the link
 * with a file, as every writer of that path does).
 */
function verify(path: string, expected: FileVersion | 'absent', fd: number | undefined): void {
  if (expected !== 'absent' && fd !== undefined) {
    if (!sameStat(fstatSync(fd, { bigint: true }), expected)) throw new Conflict(`${path} was rewritten`);
    if (readAll(fd) !== expected.text) throw new Conflict(`${path} was rewritten in place`);
  }
  let st: BigIntStats;
  try {
    st = statSync(path, { bigint: true });
  } catch (err) {
    if (errno(err) === 'ENOENT' && expected === 'absent') return;
    if (errno(err) === 'ENOENT') throw new Conflict(`${path} was removed`);
    throw err;
  }
  if (expected === 'absent') throw new Conflict(`${path} was created`);
  if (st.ino !== expected.ino) throw new Conflict(`${path} was replaced`);
}

/** Opens `path` read-only if it is still `expected`'s inode; undefined (a conflict) otherwise. */
function openExpected(path: string, expected: FileVersion): number | undefined {
  let fd;
  try {
    fd = openSync(path, constants.O_RDONLY);
  } catch (err) {
    if (errno(err) === 'ENOENT') return undefined;
    throw err;
  }
  if (fstatSync(fd, { bigint: true }).ino !== expected.ino) {
    closeSync(fd);
    return undefined;
  }
  return fd;
}

export interface Precondition {
  readonly path: string;
  readonly expected: FileVersion | 'absent';
}

/**
 * Replaces `path` with `content` only if `path` is still `expected` ('absent': does not exist)
 * and every `also` precondition still holds at the moment of the rename.
 */
export async function replaceIfUnchanged(
  path: string,
  expected: FileVersion | 'absent',
  content: string,
  options: CasOptions & { readonly also?: readonly Precondition[] },
): Promise<CasResult> {
  const checks: Array<Precondition & { fd: number | undefined }> = [];
  try {
    for (const p of [{ path, expected }, ...(options.also ?? [])]) {
      let fd: number | undefined;
      if (p.expected !== 'absent') {
        fd = openExpected(p.path, p.expected);
        if (fd === undefined) return { kind: 'conflict', reason: `${p.path} changed since it was read` };
      }
      checks.push({ ...p, fd });
    }
    try {
      await writeFileAtomic(path, content, {
        mode: options.mode,
        sync: options.sync,
        beforeRename: () => {
          options.onCommit?.('before-rename', path);
          // The target's own check last: it is the one a writer's rename is most likely to fail.
          for (const c of [...checks.slice(1), checks[0]!]) verify(c.path, c.expected, c.fd);
        },
      });
    } catch (err) {
      if (err instanceof Conflict) return { kind: 'conflict', reason: err.message };
      throw err;
    }
    options.onCommit?.('after-rename', path);
    // The inode we replaced: anything written into it since our check was meant for the path.
    const replaced = checks[0]!;
    if (replaced.fd !== undefined && replaced.expected !== 'absent') {
      const st = fstatSync(replaced.fd, { bigint: true });
      const text = readAll(replaced.fd);
      if (st.size !== replaced.expected.size || st.mtimeNs !== replaced.expected.mtimeNs || text !== replaced.expected.text) {
        return { kind: 'swapped', overwritten: text };
      }
    }
    return { kind: 'swapped' };
  } finally {
    for (const c of checks) if (c.fd !== undefined) closeSync(c.fd);
  }
}

/** Removes `path` only if it is still `expected`. */
export function unlinkIfUnchanged(path: string, expected: FileVersion): CasResult {
  const fd = openExpected(path, expected);
  if (fd === undefined) return { kind: 'conflict', reason: `${path} changed since it was read` };
  try {
    verify(path, expected, fd);
    unlinkSync(path);
    return { kind: 'swapped' };
  } catch (err) {
    if (err instanceof Conflict) return { kind: 'conflict', reason: err.message };
    if (errno(err) === 'ENOENT') return { kind: 'conflict', reason: `${path} was removed` };
    throw err;
  }
  finally {
    closeSync(fd);
  }
}
