/**
 * A file read again when it changes: each `read()` stats the path (following symlinks, so a
 * kubelet-projected file swapped through its `..data` link counts as changed) and reads the
 * content only when device, inode, size or mtime differ from the last read. For credentials
 * that rotate under a running process (projected service-account tokens, root files); one stat
 * per use instead of a watch that can miss a swap.
 */
import { readFile, stat } from 'node:fs/promises';

export interface RereadResult {
  readonly text: string;
  /** True on the first read and whenever the content was read again. */
  readonly changed: boolean;
}

export class RereadFile {
  readonly path: string;
  #stamp: string | undefined;
  #text: string | undefined;

  constructor(path: string) {
    this.path = path;
  }

  /** The current text; rejects (ENOENT, EACCES, ...) when the file cannot be read now. */
  async read(): Promise<RereadResult> {
    const st = await stat(this.path);
    const stamp = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
    if (stamp === this.#stamp && this.#text !== undefined) return { text: this.#text, changed: false };
    const text = await readFile(this.path, 'utf8');
    const changed = text !== this.#text;
    this.#stamp = stamp;
    this.#text = text;
    return { text, changed };
  }
}
