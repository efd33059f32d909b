/**
 * A short cache of successful authentications, keyed by SHA-256 of (cluster, token) so the
 * token itself is never kept. An entry lives `ttlMs` at most and never past the token's own
 * `exp`; tokens without a known expiry are not cached. Bounded: the oldest entry goes first.
 */
import { hash } from 'node:crypto';
import type { Clock } from '../../core/clock.js';
import { ExpiringMap } from '../../core/expiring-map.js';
import type { Caller } from '../caller.js';

export interface TokenCacheOptions {
  readonly clock: Clock;
  readonly ttlMs: number;
  readonly maxEntries: number;
}

export function tokenCacheKey(key: { readonly clusterId: string; readonly token: string }): string {
  // One-shot hash (Node >= 20.12): half the cost of a Hash object on every call.
  return hash('sha256', `${key.clusterId}\0${key.token}`, 'base64url');
}

export class TokenCache {
  readonly #entries: ExpiringMap<Caller>;
  readonly #options: TokenCacheOptions;

  constructor(options: TokenCacheOptions) {
    this.#options = options;
    this.#entries = new ExpiringMap(options);
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): Caller | undefined {
    return this.#entries.get(key);
  }

  /** Caches `caller` under `key` when its token expiry is known and still ahead. */
  put(key: string, caller: Caller): void {
    if (this.#options.ttlMs <= 0 || caller.expiresAtMs === undefined) return;
    const now = this.#options.clock.now();
    const expiresAtMs = Math.min(now + this.#options.ttlMs, caller.expiresAtMs);
    if (expiresAtMs <= now) return;
    this.#entries.set(key, caller, expiresAtMs);
  }
}
