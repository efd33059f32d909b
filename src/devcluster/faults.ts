/**
 * Fault injection for tests: added latency, the next N requests failing with 429 (Retry-After)
 * or 500, every open watch dropped, history compacted so older resourceVersions get 410.
 * A `match` narrows request faults to some requests (by method, path substring or verb).
 */
import type { ObjectStore } from './store.js';
import { internalError, tooManyRequests, type ApiError } from './status.js';

export interface FaultMatch {
  readonly method?: string;
  /** Substring of the request path, e.g. `/pods` or `/tokenreviews`. */
  readonly path?: string;
  /** Skip watch requests (default false: a watch request counts too). */
  readonly exceptWatch?: boolean;
}

interface PendingFailure {
  remaining: number;
  readonly make: () => ApiError;
  readonly match: FaultMatch;
}

export interface FaultRequest {
  readonly method: string;
  readonly path: string;
  readonly watch: boolean;
}

export interface Faults {
  /** Every API request waits this long before it is handled (0 = off). */
  setLatency(ms: number): void;
  /** The next `count` matching requests get 429 Too Many Requests with Retry-After. */
  failWith429(count: number, options?: { retryAfterSeconds?: number; match?: FaultMatch }): void;
  /** The next `count` matching requests get 500 InternalError. */
  failWith500(count: number, options?: { match?: FaultMatch }): void;
  /** Destroys every open watch connection (clients see the stream break). Returns how many. */
  dropWatches(): number;
  /** Forgets history up to the current resourceVersion: watches from older RVs get 410 Gone. */
  compact(): void;
  /** Removes every pending fault and the latency. */
  clear(): void;
  /** Number of requests that were failed on purpose so far. */
  readonly injectedFailures: number;
  /** Number of open watch connections. */
  readonly openWatches: number;
}

function matches(m: FaultMatch, r: FaultRequest): boolean {
  if (m.method && m.method.toUpperCase() !== r.method) return false;
  if (m.path && !r.path.includes(m.path)) return false;
  if (m.exceptWatch && r.watch) return false;
  return true;
}

export class FaultInjector implements Faults {
  #latencyMs = 0;
  #pending: PendingFailure[] = [];
  #injected = 0;
  readonly #store: ObjectStore;
  readonly #watches: Set<{ destroy(): void }>;

  constructor(options: { store: ObjectStore; watches: Set<{ destroy(): void }> }) {
    this.#store = options.store;
    this.#watches = options.watches;
  }

  get latencyMs(): number {
    return this.#latencyMs;
  }

  setLatency(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`latency must be a non-negative number of milliseconds, got ${ms}`);
    this.#latencyMs = ms;
  }

  failWith429(count: number, options: { retryAfterSeconds?: number; match?: FaultMatch } = {}): void {
    const retry = options.retryAfterSeconds ?? 1;
    this.#pending.push({ remaining: count, make: () => tooManyRequests(retry), match: options.match ?? {} });
  }

  failWith500(count: number, options: { match?: FaultMatch } = {}): void {
    this.#pending.push({ remaining: count, make: () => internalError('Internal error occurred: injected fault'), match: options.match ?? {} });
  }

  dropWatches(): number {
    const all = [...this.#watches];
    for (const w of all) w.destroy();
    return all.length;
  }

  compact(): void {
    this.#store.compact();
  }

  clear(): void {
    this.#pending = [];
    this.#latencyMs = 0;
  }

  get injectedFailures(): number {
    return this.#injected;
  }

  get openWatches(): number {
    return this.#watches.size;
  }

  /** The failure this request must get, if any (consumes one from the matching fault). */
  takeFailure(r: FaultRequest): ApiError | undefined {
    const f = this.#pending.find((p) => p.remaining > 0 && matches(p.match, r));
    if (!f) return undefined;
    f.remaining--;
    this.#pending = this.#pending.filter((p) => p.remaining > 0);
    this.#injected++;
    return f.make();
  }
}
