/**
 * The plugin binaries on the host: copied from the image when missing or not the copy this
 * process made, checked for /readyz without hashing, removed on uninstall.
 */
import { statSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { copyFileAtomic } from '../../ops/atomic-file.js';
import type { InstallConfig } from './config.js';
import { InstallError } from './errors.js';
import { BINARY_MODE, durable, errno, removeIfPresent } from './host-fs.js';

interface InstalledBinary {
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
}

type BinaryConfig = Pick<InstallConfig, 'binaries' | 'binariesSourceDir' | 'mountedCniBinDir'>;

export class InstalledBinaries {
  readonly #cfg: BinaryConfig;
  /** What each binary looked like right after we put it in place (inode, size, mtime). */
  readonly #installed = new Map<string, InstalledBinary>();

  constructor(config: BinaryConfig) {
    this.#cfg = config;
  }

  /** Copies every binary that is missing or differs from its source; returns their names. */
  async ensure(): Promise<string[]> {
    await mkdir(this.#cfg.mountedCniBinDir, { recursive: true });
    const copied: string[] = [];
    for (const name of this.#cfg.binaries) {
      const source = join(this.#cfg.binariesSourceDir, name);
      let src;
      try {
        src = await stat(source);
      } catch (err) {
        throw new InstallError('ERR_CNI_BINARY_MISSING', `source binary ${source} is missing (${errno(err) ?? 'error'})`, err);
      }
      if (!src.isFile()) throw new InstallError('ERR_CNI_BINARY_MISSING', `source binary ${source} is not a regular file`);
      if (this.#binaryProblem(name, src) === undefined) continue;
      await copyFileAtomic(source, join(this.#cfg.mountedCniBinDir, name), { ...durable(BINARY_MODE), mtimeMs: src.mtimeMs });
      const dst = await stat(join(this.#cfg.mountedCniBinDir, name));
      this.#installed.set(name, { ino: dst.ino, size: dst.size, mtimeMs: dst.mtimeMs });
      copied.push(name);
    }
    return copied;
  }

  /** The first reason a binary is not in place (synchronous, for /readyz), or undefined. */
  problem(): string | undefined {
    for (const name of this.#cfg.binaries) {
      let src;
      try {
        src = statSync(join(this.#cfg.binariesSourceDir, name));
      } catch {
        return `source binary ${name} is missing`;
      }
      const p = this.#binaryProblem(name, src);
      if (p !== undefined) return p;
    }
    return undefined;
  }

  /** Deletes the installed binaries; returns the names that were there. */
  async remove(): Promise<string[]> {
    const removed: string[] = [];
    for (const name of this.#cfg.binaries) {
      if (await removeIfPresent(join(this.#cfg.mountedCniBinDir, name))) removed.push(name);
    }
    return removed;
  }

  /**
   * Whether the installed binary is still the copy this process made: same inode, size and
   * mtime as right after our rename. Anyone replacing it (rename: new inode) or writing into
   * it (new mtime or size) shows up, without hashing large executables on every pass. A fresh
   * process has no record and copies once at start, which is also how upgrades land.
   */
  #binaryProblem(name: string, src: { size: number }): string | undefined {
    let dst;
    try {
      dst = statSync(join(this.#cfg.mountedCniBinDir, name));
    } catch {
      return `binary ${name} is missing`;
    }
    if (!dst.isFile()) return `binary ${name} is not a regular file`;
    if ((dst.mode & 0o111) === 0) return `binary ${name} is not executable`;
    const ours = this.#installed.get(name);
    if (ours === undefined) return `binary ${name} not installed by this process yet`;
    if (dst.size !== src.size || dst.ino !== ours.ino || dst.size !== ours.size || dst.mtimeMs !== ours.mtimeMs) {
      return `binary ${name} differs from ours`;
    }
    return undefined;
  }
}
