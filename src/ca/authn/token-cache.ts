/**
 * A short cache of successful authentications, keyed by the cluster and the SHA-256 of the
 * token, so the token itself is never kept. An entry lives `ttlMs` at most and never past the token's own
 * `exp`; tokens without a known expiry are not cached. Bounded: the oldest entry goes first.
 * `refreshDue` says when an entry in use is in the last `REFRESH_AHEAD_FRACTION` of its `ttlMs`
 * (and a new review could extend it): the authenticator then reviews again in the background,
 * so a busy caller does not wait for a review each time its entry expires.
 */
import { hash } from 'node:crypto';
import type { Clock } from '../../core/clock.js';
import { ExpiringMap, type ExpiringEntry } from '../../core/expiring-map.js';
import type { Caller } from '../caller.js';

export interface TokenCacheOptions {
  readonly clock: Clock;
  readonly ttlMs: number;
  readonly maxEntries: number;
}

/**
 * `<clusterId>\0<base64url SHA-256 of the token>`: the digest has a fixed length (43) at the end,
 * so the two parts never run into each other. The one-shot hash (Node >= 20.12) costs half a Hash
 * object; hashing the token alone spares copying the ~1 KB token into a joined string per call.
 */
export function tokenCacheKey(key: { readonly clusterId: string; readonly token: string }): string {
  return `${key.clusterId}\0${hash('sha256', key.token, 'base64url')}`;
}

/** An entry is refreshed once less than this share of `ttlMs` is left. */
export const REFRESH_AHEAD_FRACTION = 0.2;

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

  /** The live entry under `key`, caller and expiry in one lookup (the per-call path: `entryRefreshDue` then needs none). */
  entry(key: string): ExpiringEntry<Caller> | undefined {
    return this.#entries.entry(key);
  }

  /** True when the live entry under `key` ends within the last REFRESH_AHEAD_FRACTION of `ttlMs` and before its token's `exp`. */
  refreshDue(key: string): boolean {
    const e = this.#entries.entry(key);
    return e !== undefined && this.entryRefreshDue(e);
  }

  /** `refreshDue` of an entry already looked up. */
  entryRefreshDue(e: ExpiringEntry<Caller>): boolean {
    const at = e.expiresAtMs;
    if (e.value.expiresAtMs === undefined || at >= e.value.expiresAtMs) return false;
    return at - this.#options.clock.now() < this.#options.ttlMs * REFRESH_AHEAD_FRACTION;
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
