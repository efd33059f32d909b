/**
 * Temporary directories for tests that are gone afterwards even when a test fails.
 *
 * Every directory made here is removed by the hook it is tied to (the file's `after`, a test's
 * `t.after`, or an explicit `remove()` in a `finally`), and, as a fallback, when the process exits:
 * node's runner skips the remaining `after` hooks once one of them throws (a server whose close
 * fails), and a test process can end on an uncaught error. The fallback is one `exit` listener for
 * all directories of the process.
 *
 *   const scratch = Scratch.forFile('cb-thing-');       // removed after the file's tests
 *   const dir = Scratch.forTest(t, 'cb-case-').dir;      // removed when this test ends
 *   const s = Scratch.create('cb-x-'); try { … } finally { await s.remove(); }
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';

/** What `t` in `test(name, (t) => …)` offers for cleanup. */
export interface AfterHost {
  after(fn: () => unknown): void;
}

const live = new Set<string>();
let exitHookInstalled = false;

function removeAllSync(): void {
  for (const dir of live) rmSync(dir, { recursive: true, force: true });
  live.clear();
}

/** A fresh directory `<tmpdir>/<prefix>XXXXXX`, removed at process exit unless removed before. */
export function tempDirSync(prefix: string): string {
  if (!exitHookInstalled) {
    process.once('exit', removeAllSync);
    exitHookInstalled = true;
  }
  const dir = mkdtempSync(join(tmpdir(), prefix));
  live.add(dir);
  return dir;
}

/** Removes a directory made by tempDirSync (or any directory) and forgets it. */
export async function removeTempDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  live.delete(dir);
}

export function removeTempDirSync(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  live.delete(dir);
}

export class Scratch {
  private constructor(readonly dir: string) {}

  /** Made now, removed by `remove()` (call it in a `finally` or a hook) or at process exit. */
  static create(prefix = 'certbroker-test-'): Scratch {
    return new Scratch(tempDirSync(prefix));
  }

  /** A scratch directory for the calling test file: made now, removed after the file's tests. */
  static forFile(prefix = 'certbroker-test-'): Scratch {
    const scratch = Scratch.create(prefix);
    after(() => scratch.remove());
    return scratch;
  }

  /** A scratch directory for one test: removed when the test ends, passed or failed. */
  static forTest(t: AfterHost, prefix = 'certbroker-test-'): Scratch {
    const scratch = Scratch.create(prefix);
    t.after(() => scratch.remove());
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

  remove(): Promise<void> {
    return removeTempDir(this.dir);
  }
}
