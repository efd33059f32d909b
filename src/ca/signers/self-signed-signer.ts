/**
 * The self-signed CA: on first start it creates a root (ECDSA P-256 by default, RSA 2048
 * optional) and stores it in the `istio-ca-secret` Secret; later starts and other replicas
 * read the same Secret. When two replicas create at once, the apiserver keeps one (the other
 * gets 409) and the loser re-reads and uses the winner's root.
 *
 * A stored root is checked as a plug-in root is (pki's `rootCaKeyMaterial`: CA, keyCertSign,
 * valid now, self-signed, key matches). One that fails is never installed and never overwritten:
 * the signer stays not ready, saying which Secret and what is wrong, and keeps re-reading it with
 * backoff, so deleting the Secret (or replacing it with a valid root) recovers without a restart.
 *
 * Once loaded, the Secret is read again every `pollIntervalMs` (default 30 s): a change (a
 * `certbroker ca rotate-root` step, root-rotation.ts: root-cert.pem with several roots, a new
 * signing root) is checked the same way and installed, so every replica follows a rotation
 * without a restart; a change that fails the checks is logged and the material in use is kept.
 * The CA only reads after creating: the rotation's writer is the CLI, one step at a time.
 *
 * Replicas converge on one root: a replica serves only a root it stored (its create answered
 * 201) or read back from the Secret. When the Secret disappears while replicas sign, each puts
 * the root it serves back with the same conflict-checked create at its next poll; the first
 * create wins and the others (and a replica starting meanwhile, which creates its own) adopt
 * whatever the Secret then holds, so no replica goes on serving a root the Secret does not hold.
 */
import { createHash } from 'node:crypto';
import { describeError } from '../../core/errors.js';
import {
  caKeyMaterial,
  certificateFields,
  checkSigningCa,
  createRootCa,
  exportPkcs8Pem,
  parseCertificates,
  parsePrivateKeyPem,
  parseCertificate,
  rootCaKeyMaterial,
  type CaKeyMaterial,
} from '../../pki/index.js';
import { CaError } from '../errors.js';
import type { CaSecretStore, StoredCa } from './ca-secret-store.js';
import { MaterialSigner, type MaterialSignerOptions } from './material-signer.js';

export interface SelfSignedSignerOptions extends MaterialSignerOptions {
  readonly store: CaSecretStore;
  readonly trustDomain: string;
  readonly keyType: 'ec' | 'rsa';
  readonly rootTtlSeconds: number;
  /** How often the Secret is read again for a rotation; default 30 000. */
  readonly pollIntervalMs?: number;
}

/** Default interval between reads of the stored root once loaded. */
export const SELF_SIGNED_POLL_MS = 30_000;

export class SelfSignedSigner extends MaterialSigner {
  readonly description: string;
  readonly #o: SelfSignedSignerOptions;
  readonly #stop = new AbortController();
  /** 'created' when this process created the root, 'loaded' when it read an existing one. */
  origin: 'created' | 'loaded' | undefined;
  /** Fingerprint of the stored texts installed (to see a change). */
  #installed = '';
  /** What is installed, as stored (put back when the Secret disappears). */
  #current: StoredCa | undefined;
  /** Successful installs (tests observe reloads through it). */
  loads = 0;

  constructor(options: SelfSignedSignerOptions) {
    super(options);
    this.#o = options;
    this.description = `self-signed (${options.store.location})`;
  }

  /** Loads or creates the root once; throws on failure (or when `close()` interrupts it). */
  async load(): Promise<void> {
    const signal = this.#stop.signal;
    let stored = await this.#o.store.read(signal);
    if (stored) {
      this.origin = 'loaded';
      this.options.logger.info('loaded self-signed root', { location: this.#o.store.location });
    } else {
      const created = await this.#createRoot();
      const result = await this.#o.store.create(created, signal);
      if (result === 'created') {
        stored = created;
        this.origin = 'created';
        this.options.logger.info('created self-signed root', { location: this.#o.store.location });
      } else {
        stored = await this.#o.store.read(signal);
        if (!stored) throw new Error(`${this.#o.store.location} reported as existing but cannot be read`);
        this.origin = 'loaded';
        this.options.logger.info('another replica created the root first; using it', { location: this.#o.store.location });
      }
    }
    this.#install(stored);
  }

  #install(stored: StoredCa): void {
    const material = this.#materialFrom(stored);
    this.#installed = fingerprintOf(stored);
    this.#current = stored;
    this.loads++;
    this.install(material);
  }

  /** Reads the Secret once and installs what changed; a bad change is logged and the material kept. */
  async reload(): Promise<void> {
    let stored: StoredCa | undefined;
    try {
      stored = await this.#o.store.read(this.#stop.signal);
    } catch (err) {
      if (!this.#stop.signal.aborted) this.options.logger.warn('self-signed CA Secret not read; keeping the root in use', { location: this.#o.store.location, err: describeError(err) });
      return;
    }
    if (stored === undefined) {
      await this.#restore();
      return;
    }
    if (fingerprintOf(stored) === this.#installed) return;
    try {
      this.#install(stored);
      this.options.logger.info('self-signed CA Secret changed; new material installed', { location: this.#o.store.location });
    } catch (err) {
      this.options.logger.error('self-signed CA Secret changed but is unusable; keeping the root in use', { reason: describeError(err) });
    }
  }

  /**
   * The Secret is gone: store the root in use again with the conflict-checked create; when
   * another replica got there first (409), read its root back and adopt it.
   */
  async #restore(): Promise<void> {
    const current = this.#current;
    if (!current) return;
    const location = this.#o.store.location;
    try {
      const { resourceVersion: _rv, ...again } = current;
      const result = await this.#o.store.create(again, this.#stop.signal);
      if (result === 'created') {
        this.options.logger.warn('self-signed CA Secret was gone; stored the root in use again', { location });
        return;
      }
      const winner = await this.#o.store.read(this.#stop.signal);
      if (winner === undefined) {
        this.options.logger.warn('self-signed CA Secret is gone and could not be stored again; retrying at the next poll', { location });
        return;
      }
      if (fingerprintOf(winner) === this.#installed) return;
      this.#install(winner);
      this.options.logger.warn('self-signed CA Secret was gone and another replica stored its root first; using it', { location });
    } catch (err) {
      if (!this.#stop.signal.aborted) this.options.logger.warn('self-signed CA Secret is gone and could not be stored again; retrying at the next poll', { location, err: describeError(err) });
    }
  }

  async #poll(): Promise<void> {
    const interval = this.#o.pollIntervalMs ?? SELF_SIGNED_POLL_MS;
    while (!this.#stop.signal.aborted) {
      try {
        await this.options.clock.sleep(interval, this.#stop.signal);
      } catch {
        return;
      }
      await this.reload();
    }
  }

  /** Keeps trying `load()` with capped backoff until it works or `close()`. */
  async start(): Promise<void> {
    let delayMs = 500;
    while (!this.#stop.signal.aborted) {
      try {
        await this.load();
        void this.#poll();
        return;
      } catch (err) {
        if (this.#stop.signal.aborted) return;
        // A CaError already names the Secret and the problem; anything else (apiserver) does not.
        const reason = err instanceof CaError ? err.message : `cannot load ${this.#o.store.location}: ${describeError(err)}`;
        this.setNotReady(reason);
        if (err instanceof CaError) this.options.logger.error('stored self-signed root refused; not ready, retrying', { reason, delayMs });
        else this.options.logger.warn('self-signed CA not loaded, retrying', { err, delayMs });
        try {
          await this.options.clock.sleep(delayMs, this.#stop.signal);
        } catch {
          return;
        }
        delayMs = Math.min(delayMs * 2, 30_000);
      }
    }
  }

  override async close(): Promise<void> {
    this.#stop.abort();
    await super.close();
  }

  async #createRoot(): Promise<StoredCa> {
    const ca = await createRootCa({
      subject: `O=${this.#o.trustDomain}`,
      ttlSeconds: this.#o.rootTtlSeconds,
      keySpec: this.#o.keyType === 'rsa' ? { kind: 'rsa', bits: 2048 } : { kind: 'ec', curve: 'P-256' },
      nowMs: this.options.clock.now(),
    });
    return { certPem: ca.pem, keyPem: exportPkcs8Pem(ca.privateKey) };
  }

  /** Parses and checks a stored root; ERR_CA_SIGNER_MATERIAL_INVALID naming the Secret and the problem. */
  #materialFrom(stored: StoredCa): CaKeyMaterial {
    try {
      const now = this.options.clock.now();
      const cert = parseCertificate(stored.certPem.trim());
      const keyObject = parsePrivateKeyPem(stored.keyPem.reveal());
      const signing = rootCaKeyMaterial({ cert, keyObject }, now, 'ca-cert.pem');
      if (stored.rootsPem === undefined) return signing;
      // root-cert.pem: every root trusted during a rotation; each a CA root valid now, the signing one among them.
      const roots = parseCertificates(stored.rootsPem, 'certificate in root-cert.pem');
      for (const r of roots) {
        checkSigningCa(r, now, `root-cert.pem (${r.subject})`);
        const f = certificateFields(new Uint8Array(r.rawData));
        if (!f.subjectDer.equals(f.issuerDer)) throw new Error(`root-cert.pem holds a certificate that is not self-signed (${r.subject})`);
      }
      if (!roots.some((r) => Buffer.from(r.rawData).equals(signing.certDer))) throw new Error('root-cert.pem does not hold ca-cert.pem, the signing root');
      return caKeyMaterial({ cert, keyObject, roots });
    } catch (err) {
      const where = this.#o.store.location;
      throw new CaError('ERR_CA_SIGNER_MATERIAL_INVALID', `${where} holds an unusable CA root (${describeError(err)}); left as it is: delete it to have a new root created`, {
        status: 'internal',
        cause: err,
      });
    }
  }
}

/** Hash of what the Secret holds (key included; only the hash is kept). */
function fingerprintOf(stored: StoredCa): string {
  return createHash('sha256')
    .update(stored.certPem)
    .update('\0')
    .update(stored.keyPem.reveal())
    .update('\0')
    .update(stored.rootsPem ?? '')
    .digest('hex');
}
