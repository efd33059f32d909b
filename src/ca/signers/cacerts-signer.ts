/**
 * The plug-in CA: Istio's `cacerts` directory (ca-cert.pem, ca-key.pem, cert-chain.pem,
 * root-cert.pem), read as one consistent set and validated by pki's `validateCaBundle` (key
 * matches, CA cert, chain reaches one of the roots). Reloaded when the files change — a directory watch for speed and
 * a content-fingerprint poll for safety (Secret volume updates swap a symlink). A bad update
 * keeps the previous material and is logged; several roots in root-cert.pem are all served
 * (root rotation). Until a first valid bundle appears the signer is not ready.
 */
import { createHash } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CACERTS_FILES, PkiError, validateCaBundle } from '../../pki/index.js';
import { CoalescedRun } from '../../core/coalesced-run.js';
import { describeError } from '../../core/errors.js';
import { MaterialSigner, type MaterialSignerOptions } from './material-signer.js';

export interface CacertsSignerOptions extends MaterialSignerOptions {
  readonly dir: string;
  /** Fingerprint poll interval; default 5 s. */
  readonly pollIntervalMs?: number;
}

export class CacertsSigner extends MaterialSigner {
  readonly description: string;
  readonly #o: CacertsSignerOptions;
  readonly #stop = new AbortController();
  #fingerprint = '';
  #watcher: FSWatcher | undefined;
  readonly #checking = new CoalescedRun(() => this.#checkOnce(), () => this.#stop.signal.aborted);
  /** Number of successful loads (tests observe reloads through it). */
  loads = 0;
  /** The last load error, if the latest attempt failed. */
  lastError: string | undefined;

  constructor(options: CacertsSignerOptions) {
    super(options);
    this.#o = options;
    this.description = `cacerts:${options.dir}`;
  }

  /** Loads what is there now (not ready if invalid) and starts watching; never throws. */
  async start(): Promise<void> {
    await this.check();
    try {
      this.#watcher = watch(this.#o.dir, { persistent: false }, () => void this.check());
      this.#watcher.on('error', () => undefined);
    } catch {
      // The directory may not exist yet; the poll below picks it up when it does.
    }
    void this.#poll();
  }

  /** Re-reads the files and reloads when their content changed. Calls coalesce. */
  check(): Promise<void> {
    return this.#checking.run();
  }

  override async close(): Promise<void> {
    this.#stop.abort();
    this.#watcher?.close();
    await super.close();
  }

  /** The four files as they are now; a missing or unreadable one is absent from the map. */
  async #readAll(): Promise<Map<string, string>> {
    const texts = new Map<string, string>();
    for (const name of CACERTS_FILES) {
      try {
        texts.set(name, await readFile(join(this.#o.dir, name), 'utf8'));
      } catch {
        // missing or unreadable: absent from the set
      }
    }
    return texts;
  }

  /**
   * Re-reads until two reads in a row agree, starting from `previous`. Kubernetes updates a
   * mounted Secret by swapping a `..data` symlink, so a read that straddles the swap can see
   * some old and some new files — a mix that may even validate (old intermediate + new root
   * bundle that still carries the old root). Two identical reads in a row cannot straddle one swap.
   */
  async #readConsistent(previous: Map<string, string>): Promise<Map<string, string> | undefined> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await this.#readAll();
      const same = current.size === previous.size && [...current].every(([k, v]) => previous.get(k) === v);
      if (same) return current;
      previous = current;
    }
    return undefined; // still changing: the next watch event or poll tries again
  }

  async #checkOnce(): Promise<void> {
    // One read settles the common case (nothing changed); a change is confirmed by a second.
    const first = await this.#readAll();
    if (fingerprintOf(first) === this.#fingerprint) return;
    const texts = await this.#readConsistent(first);
    if (texts === undefined) return;
    // The fingerprint and the validated material come from the same bytes.
    const fp = fingerprintOf(texts);
    if (fp === this.#fingerprint) return;
    this.#fingerprint = fp;
    try {
      const missing = CACERTS_FILES.filter((n) => !texts.has(n));
      if (missing.length > 0) throw new PkiError('ERR_PKI_CACERTS_MISSING', `CA directory ${this.#o.dir} is incomplete: missing ${missing.join(', ')}`);
      const material = validateCaBundle(
        {
          caCertPem: texts.get('ca-cert.pem')!,
          caKeyPem: texts.get('ca-key.pem')!,
          certChainPem: texts.get('cert-chain.pem')!,
          rootCertPem: texts.get('root-cert.pem')!,
        },
        this.options.clock.now(),
      );
      this.lastError = undefined;
      this.loads++;
      this.install(material);
    } catch (err) {
      this.lastError = describeError(err);
      if (!this.material) this.setNotReady(`cacerts ${this.#o.dir}: ${this.lastError}`);
      this.options.logger.error(this.material ? 'cacerts update rejected; keeping the previous CA' : 'cacerts not loadable', {
        dir: this.#o.dir,
        err,
      });
    }
  }

  async #poll(): Promise<void> {
    const interval = this.#o.pollIntervalMs ?? 5000;
    while (!this.#stop.signal.aborted) {
      try {
        await this.options.clock.sleep(interval, this.#stop.signal);
      } catch {
        return;
      }
      await this.check().catch(() => undefined);
    }
  }
}

function fingerprintOf(texts: ReadonlyMap<string, string>): string {
  const h = createHash('sha256');
  for (const name of CACERTS_FILES) {
    const text = texts.get(name);
    if (text === undefined) h.update(name).update('\0missing\0');
    else h.update(name).update('\0').update(text).update('\0');
  }
  return h.digest('hex');
}
