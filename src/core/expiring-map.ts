/**
 * A bounded map whose entries expire: each entry is kept until its own `expiresAtMs` (read from
 * the injected clock when it is looked up; no timer is armed) and at most `maxEntries` are kept,
 * the oldest insertion going first. Setting a key again makes it the newest.
 */
import type { Clock } from './clock.js';

export interface ExpiringMapOptions {
  readonly clock: Pick<Clock, 'now'>;
  readonly maxEntries: number;
}

/** A stored value and when it expires. */
export interface ExpiringEntry<V> {
  readonly value: V;
  readonly expiresAtMs: number;
}

export class ExpiringMap<V> {
  readonly #entries = new Map<string, ExpiringEntry<V>>();
  readonly #o: ExpiringMapOptions;

  constructor(options: ExpiringMapOptions) {
    this.#o = options;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The value under `key` while it has not expired (an expired entry is dropped). */
  get(key: string): V | undefined {
    return this.entry(key)?.value;
  }

  /** The live entry under `key` (its value and expiry, in one lookup), or undefined (an expired entry is dropped). */
  entry(key: string): ExpiringEntry<V> | undefined {
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (this.#o.clock.now() >= e.expiresAtMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return e;
  }

  /** When the live entry under `key` expires (ms), or undefined when there is none. */
  expiresAt(key: string): number | undefined {
    return this.entry(key)?.expiresAtMs;
  }

  /** Keeps `value` under `key` until `expiresAtMs`, as the newest entry; evicts the oldest beyond the bound. */
  set(key: string, value: V, expiresAtMs: number): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAtMs });
    while (this.#entries.size > this.#o.maxEntries) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
  }
}
