/** Test helper: runs the real openssl CLI in a scratch directory. */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
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

export class Scratch {
  private constructor(readonly dir: string) {}

  /** A scratch directory for the calling test file: made now, removed after the file's tests. */
  static forFile(): Scratch {
    const scratch = new Scratch(mkdtempSync(join(tmpdir(), 'certbroker-pki-')));
    after(() => scratch.remove());
    return scratch;
  }

  async write(name: string, content: string | Uint8Array): Promise<string> {
    const p = join(this.dir, name);
    await writeFile(p, content);
    return p;
  }

  path(name: string): string {
    return join(this.dir, name);
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
