/** Test helper: runs the real openssl CLI in a scratch directory. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface OpensslResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export async function openssl(args: readonly string[], cwd?: string): Promise<OpensslResult> {
  try {
    const { stdout, stderr } = await run('openssl', [...args], { cwd, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** Scratch directories live in test/support/scratch.ts; re-exported for the pki tests. */
export { Scratch } from '../support/scratch.js';
