/**
 * The part both built-in signers share: hold the current `CaKeyMaterial`, issue leaves from it
 * on the fast path (CSR parse+verify, template leaf, node:crypto sign with the cached
 * KeyObject), append the precomputed response tail (intermediates, roots last), and tell
 * listeners when the material or the readiness changes (installed, closed, every signing worker
 * gone). Subclasses only decide where material comes from.
 */
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/log.js';
import { Listeners } from '../../core/listeners.js';
import { certificateToPem, responseChainPems, type CaKeyMaterial, FastLeafIssuer } from '../../pki/index.js';
import { CaError } from '../errors.js';
import { issueServingCertificate } from '../serving-cert.js';
import type { PublicKeySignRequest, ServingCertificate, SignedChain, Signer, SignRequest } from '../signer.js';

/** Issues a leaf PEM from material; the default runs on this thread, a pool may replace it. */
export interface LeafIssuerBackend {
  issue(request: SignRequest): Promise<{ readonly pem: string; readonly serialHex: string; readonly notAfterMs: number }>;
  /** Stops the backend; with `drainMs`, requests already taken are answered first (up to that long). */
  close(drainMs?: number): Promise<void>;
  /**
   * Why the backend cannot issue and will not recover in this process (e.g. every signing worker
   * died), undefined while it can. Makes the signer not ready and the CA not live.
   */
  broken?(): string | undefined;
}

/**
 * How long a backend retired by new material (cacerts reload) may finish the requests it has
 * already taken: they complete with the old signer and the old response tail instead of failing.
 */
export const RETIRED_BACKEND_DRAIN_MS = 5000;

export type LeafIssuerFactory = (
  material: CaKeyMaterial,
  options: {
    readonly clock: Clock;
    readonly maxTtlSeconds: number;
    readonly logger: Logger;
    /** To be called when the backend becomes broken (`broken()` starts answering), so readiness hears of it. */
    readonly onBroken?: () => void;
  },
) => LeafIssuerBackend;

/** The in-thread fast path. */
export const inThreadIssuerFactory: LeafIssuerFactory = (material, options) => {
  const issuer = new FastLeafIssuer({ signer: material.leafSigner, now: () => options.clock.now(), maxTtlSeconds: options.maxTtlSeconds });
  return {
    issue: (r) =>
      issuer.issueAsync({ csr: r.csrPem, spiffeId: r.spiffeId, ttlSeconds: r.ttlSeconds, ...(r.servingNames ? { servingNames: r.servingNames } : {}) }),
    close: async () => undefined,
  };
};

export interface MaterialSignerOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly maxTtlSeconds: number;
  readonly issuerFactory?: LeafIssuerFactory;
}

interface Loaded {
  readonly material: CaKeyMaterial;
  readonly tail: readonly string[];
  readonly roots: readonly string[];
  readonly backend: LeafIssuerBackend;
  /**
   * Leaves with serving names (a node broker's serving certificate, one per rotation): issued
   * on this thread, so the pool's batch protocol stays the workload path alone.
   */
  readonly named: LeafIssuerBackend;
  /** Leaves for bare public keys (PodCertificateRequests), on this thread. */
  readonly keys: FastLeafIssuer;
}

export abstract class MaterialSigner implements Signer {
  abstract readonly description: string;
  protected readonly options: MaterialSignerOptions;
  #loaded: Loaded | undefined;
  #notReady = 'signing material not loaded yet';
  readonly #listeners = new Listeners<void>();

  constructor(options: MaterialSignerOptions) {
    this.options = options;
  }

  get ready(): boolean {
    return this.notReadyReason === undefined;
  }

  get notReadyReason(): string | undefined {
    if (this.#loaded === undefined) return this.#notReady;
    if (this.#loaded.material.notAfterMs <= this.options.clock.now()) return 'signing certificate has expired';
    return this.#loaded.backend.broken?.();
  }

  /** Why signing is broken for good in this process (the CA's liveness check), else undefined. */
  get brokenReason(): string | undefined {
    return this.#loaded?.backend.broken?.();
  }

  /** The material in use (tests and the serving certificate). */
  get material(): CaKeyMaterial | undefined {
    return this.#loaded?.material;
  }

  roots(): readonly string[] {
    return this.#loaded?.roots ?? [];
  }

  async sign(request: SignRequest): Promise<SignedChain> {
    const loaded = this.#loaded;
    if (!loaded) {
      throw new CaError('ERR_CA_SIGNER_NOT_READY', `signer not ready: ${this.#notReady}`, { status: 'unavailable', publicMessage: 'CA is not ready' });
    }
    const leaf = await (request.servingNames && request.servingNames.length > 0 ? loaded.named : loaded.backend).issue(request);
    return { certChain: [leaf.pem, ...loaded.tail], serialHex: leaf.serialHex, notAfterMs: leaf.notAfterMs };
  }

  async signPublicKey(request: PublicKeySignRequest): Promise<SignedChain> {
    const loaded = this.#loaded;
    if (!loaded) {
      throw new CaError('ERR_CA_SIGNER_NOT_READY', `signer not ready: ${this.#notReady}`, { status: 'unavailable', publicMessage: 'CA is not ready' });
    }
    const leaf = loaded.keys.issueForKey({ spki: request.spkiDer, spiffeId: request.spiffeId, ttlSeconds: request.ttlSeconds });
    return { certChain: [leaf.pem, ...loaded.tail], serialHex: leaf.serialHex, notAfterMs: leaf.notAfterMs };
  }

  async issueServingCertificate(request: { readonly dnsNames: readonly string[]; readonly ttlSeconds: number }): Promise<ServingCertificate> {
    const loaded = this.#loaded;
    if (!loaded) throw new CaError('ERR_CA_SIGNER_NOT_READY', 'signer not ready', { status: 'unavailable', publicMessage: 'CA is not ready' });
    return issueServingCertificate(loaded.material, { ...request, nowMs: this.options.clock.now() });
  }

  onChange(listener: () => void): () => void {
    return this.#listeners.add(listener);
  }

  async close(): Promise<void> {
    const old = this.#loaded;
    this.#loaded = undefined;
    this.#notReady = 'signer closed';
    if (old) this.#changed();
    await old?.backend.close();
  }

  /** Tells the listeners (material or readiness changed); a throwing listener is logged, the others still run. */
  #changed(): void {
    this.#listeners.emit(undefined, (err) => this.options.logger.error('signer change listener threw', { err: err instanceof Error ? err.message : String(err) }));
  }

  /** Installs new material (subclasses call this after loading and validating it). */
  protected install(material: CaKeyMaterial): void {
    const factory = this.options.issuerFactory ?? inThreadIssuerFactory;
    const old = this.#loaded;
    const loaded: Loaded = {
      material,
      tail: responseChainPems(material),
      roots: material.roots.map((r) => certificateToPem(new Uint8Array(r.rawData))),
      backend: factory(material, {
        clock: this.options.clock,
        maxTtlSeconds: this.options.maxTtlSeconds,
        logger: this.options.logger,
        // Only the backend in use is news (a retired one may break while it drains).
        onBroken: () => this.#loaded === loaded && this.#changed(),
      }),
      named: inThreadIssuerFactory(material, { clock: this.options.clock, maxTtlSeconds: this.options.maxTtlSeconds, logger: this.options.logger }),
      keys: new FastLeafIssuer({ signer: material.leafSigner, now: () => this.options.clock.now(), maxTtlSeconds: this.options.maxTtlSeconds }),
    };
    this.#loaded = loaded;
    this.options.logger.info('signing material installed', {
      signer: this.description,
      subject: material.cert.subject,
      notAfter: new Date(material.notAfterMs).toISOString(),
      roots: material.roots.length,
    });
    if (old) void old.backend.close(RETIRED_BACKEND_DRAIN_MS).catch(() => undefined);
    this.#changed();
  }

  protected setNotReady(reason: string): void {
    this.#notReady = reason;
  }
}
