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
 */
import { describeError } from '../../core/errors.js';
import { createRootCa, exportPkcs8Pem, parsePrivateKeyPem, parseCertificate, rootCaKeyMaterial, type CaKeyMaterial } from '../../pki/index.js';
import { CaError } from '../errors.js';
import type { CaSecretStore, StoredCa } from './ca-secret-store.js';
import { MaterialSigner, type MaterialSignerOptions } from './material-signer.js';

export interface SelfSignedSignerOptions extends MaterialSignerOptions {
  readonly store: CaSecretStore;
  readonly trustDomain: string;
  readonly keyType: 'ec' | 'rsa';
  readonly rootTtlSeconds: number;
}

export class SelfSignedSigner extends MaterialSigner {
  readonly description: string;
  readonly #o: SelfSignedSignerOptions;
  readonly #stop = new AbortController();
  /** 'created' when this process created the root, 'loaded' when it read an existing one. */
  origin: 'created' | 'loaded' | undefined;

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
    this.install(this.#materialFrom(stored));
  }

  /** Keeps trying `load()` with capped backoff until it works or `close()`. */
  async start(): Promise<void> {
    let delayMs = 500;
    while (!this.#stop.signal.aborted) {
      try {
        await this.load();
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
      const cert = parseCertificate(stored.certPem.trim());
      const keyObject = parsePrivateKeyPem(stored.keyPem.reveal());
      return rootCaKeyMaterial({ cert, keyObject }, this.options.clock.now(), 'ca-cert.pem');
    } catch (err) {
      const where = this.#o.store.location;
      throw new CaError('ERR_CA_SIGNER_MATERIAL_INVALID', `${where} holds an unusable CA root (${describeError(err)}); left as it is: delete it to have a new root created`, {
        status: 'internal',
        cause: err,
      });
    }
  }
}
