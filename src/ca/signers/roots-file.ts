/**
 * A PEM file of roots an external signer's certificates chain to (step-ca's root file, the
 * kubernetes-csr signer's roots file), followed while the CA runs: looked at every
 * `pollIntervalMs` (default 5 s, on the injected Clock; src/ops/reread-file.ts reads it again
 * only when its stat moved, as the istio-upstream signer's root file), and a content change that still parses
 * to at least one certificate replaces the roots and tells the listener; one that does not is
 * logged and the roots in use are kept. This is how a root rotation reaches an external backend's
 * answers without a restart: the operator puts both roots in the file for the overlap
 * (docs/operations.md, "Rotating the CA"), and the CA's last chain element follows.
 */
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { RereadFile } from '../../ops/reread-file.js';
import { certificateToPem, parseCertificates, type x509 } from '../../pki/index.js';

/** Default interval between reads of a roots file. */
export const ROOTS_FILE_POLL_MS = 5000;

export interface Roots {
  readonly certs: readonly x509.X509Certificate[];
  /** One PEM per root. */
  readonly pems: readonly string[];
  /** All of them, as the response's last element. */
  readonly pem: string;
}

/** Parses `text` into roots; throws (the caller's error) when it holds no certificate. */
function rootsOf(text: string, what: string): Roots {
  const certs = parseCertificates(text, what);
  if (certs.length === 0) throw new Error(`${what}: no certificate`);
  const pems = certs.map((c) => certificateToPem(new Uint8Array(c.rawData)));
  return { certs, pems, pem: pems.join('') };
}

export class RootsFile {
  readonly #o: { readonly path: string; readonly clock: Clock; readonly logger: Logger; readonly pollIntervalMs?: number };
  readonly #stop = new AbortController();
  readonly #file: RereadFile;
  #text: string;
  #roots: Roots;

  /** `text` is the file's content as first read (the signer's start validated it). */
  constructor(options: { readonly path: string; readonly clock: Clock; readonly logger: Logger; readonly pollIntervalMs?: number }, text: string) {
    this.#o = options;
    this.#file = new RereadFile(options.path);
    this.#text = text;
    this.#roots = rootsOf(text, options.path);
  }

  get roots(): Roots {
    return this.#roots;
  }

  /** Polls until `close()`; `changed(roots)` after each accepted change. */
  watch(changed: (roots: Roots) => void): void {
    void this.#poll(changed);
  }

  /** Reads the file once; true when new roots were taken. */
  async check(): Promise<boolean> {
    let text: string;
    try {
      text = (await this.#file.read()).text;
    } catch (err) {
      this.#o.logger.warn('roots file not readable; keeping the roots in use', { path: this.#o.path, err: describeError(err) });
      return false;
    }
    if (text === this.#text) return false;
    let next: Roots;
    try {
      next = rootsOf(text, this.#o.path);
    } catch (err) {
      this.#o.logger.error('roots file changed but holds no usable certificate; keeping the roots in use', { path: this.#o.path, err: describeError(err) });
      return false;
    }
    this.#text = text;
    this.#roots = next;
    this.#o.logger.info('roots file changed; new roots in use', { path: this.#o.path, roots: next.certs.length });
    return true;
  }

  close(): void {
    this.#stop.abort();
  }

  async #poll(changed: (roots: Roots) => void): Promise<void> {
    while (!this.#stop.signal.aborted) {
      try {
        await this.#o.clock.sleep(this.#o.pollIntervalMs ?? ROOTS_FILE_POLL_MS, this.#stop.signal);
      } catch {
        return;
      }
      if (await this.check()) changed(this.#roots);
    }
  }
}
