/**
 * A short cache of definite authentication refusals, keyed like `TokenCache` (SHA-256 of
 * cluster and token; the token itself is never kept). A client that repeats a garbage or forged
 * token — or a broker retrying with a token whose pod is gone — then costs the API server one
 * TokenReview per `ttlMs`, not one per call. Only verdicts are kept (never ERR_CA_AUTHN_BACKEND,
 * "could not decide"), for a short time (the API server may answer differently later: a service
 * account re-created, a clock corrected), and the cache is bounded (the oldest entry goes first).
 */
import type { Clock } from '../../core/clock.js';
import { ExpiringMap } from '../../core/expiring-map.js';
import type { CaAuthnCode } from '../errors.js';

export interface Refusal {
  readonly code: CaAuthnCode;
  readonly message: string;
}

export interface RefusalCacheOptions {
  readonly clock: Clock;
  /** 0 disables the cache. */
  readonly ttlMs: number;
  readonly maxEntries: number;
}

export class RefusalCache {
  readonly #entries: ExpiringMap<Refusal>;
  readonly #o: RefusalCacheOptions;

  constructor(options: RefusalCacheOptions) {
    this.#o = options;
    this.#entries = new ExpiringMap(options);
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): Refusal | undefined {
    return this.#entries.get(key);
  }

  put(key: string, refusal: Refusal): void {
    if (this.#o.ttlMs <= 0 || refusal.code === 'ERR_CA_AUTHN_BACKEND') return;
    this.#entries.set(key, refusal, this.#o.clock.now() + this.#o.ttlMs);
  }
}
