/** Small filesystem helpers for the host files install-cni writes (binaries, kubeconfig, configs). */
import { readFileSync } from 'node:fs';
import { readFile, unlink } from 'node:fs/promises';
import type { AtomicWriteOptions } from '../../ops/atomic-file.js';

export const BINARY_MODE = 0o755;
export const DEFAULT_CONFIG_MODE = 0o644;

export function errno(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

/** Host files are fsynced before the rename: a node crash leaves the old file or the new one. */
export function durable(mode: number): AtomicWriteOptions {
  return { mode, sync: true };
}

/** unlink that treats "already gone" as success; returns whether a file was removed. */
export async function removeIfPresent(path: string): Promise<boolean> {
  try {
    await unlink(path);
    return true;
  } catch (err) {
    if (errno(err) === 'ENOENT') return false;
    throw err;
  }
}

export function readTextSync(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

export async function readText(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if (errno(err) === 'ENOENT' || errno(err) === 'EISDIR') return undefined;
    throw err;
  }
}
