/**
 * A short cache of successful authentications, keyed by SHA-256 of (cluster, token) so the
 * token itself is never kept. An entry lives `ttlMs` at most and never past the token's own
 * `exp`; tokens without a known expiry are not cached. Bounded: the oldest entry goes first.
 */
import { hash } from 'node:crypto';
import type { Clock } from '../../core/clock.js';
import type { Caller } from '../caller.js';

export interface TokenCacheOptions {
  readonly clock: Clock;
  readonly ttlMs: number;
  readonly maxEntries: number;
}

interface Entry {
  readonly caller: Caller;
  readonly expiresAtMs: number;
}

export function tokenCacheKey(key: { readonly clusterId: string; readonly token: string }): string {
  // One-shot hash (Node >= 20.12): half the cost of a Hash object on every call.
  return hash('sha256', `${key.clusterId}\0${key.token}`, 'base64url');
}

export class TokenCache {
  readonly #entries = new Map<string, Entry>();
  readonly #options: TokenCacheOptions;

  constructor(options: TokenCacheOptions) {
    this.#options = options;
  }

  get size(): number {
    return this.#entries.size;
  }

  get(key: string): Caller | undefined {
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (this.#options.clock.now() >= e.expiresAtMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return e.caller;
  }

  /** Caches `caller` under `key` when its token expiry is known and still ahead. */
  put(key: string, caller: Caller): void {
    if (this.#options.ttlMs <= 0 || caller.expiresAtMs === undefined) return;
    const now = this.#options.clock.now();
    const expiresAtMs = Math.min(now + this.#options.ttlMs, caller.expiresAtMs);
    if (expiresAtMs <= now) return;
    this.#entries.delete(key);
    this.#entries.set(key, { caller, expiresAtMs });
    while (this.#entries.size > this.#options.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
  }
}
