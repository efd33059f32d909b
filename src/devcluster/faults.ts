/**
 * Fault injection for tests: added latency, the next N requests failing with 429 (Retry-After)
 * or 500, list continue tokens expiring (410), every open watch dropped, watches that stay open
 * and go silent (a hung API server replica or proxy), history compacted so older
 * resourceVersions get 410. A `match` narrows request faults to some requests (by method, path
 * substring, watch or not, query parameters).
 */
import type { ObjectStore } from './store.js';
import { expired, internalError, tooManyRequests, type ApiError } from './status.js';

export interface FaultMatch {
  readonly method?: string;
  /** Substring of the request path, e.g. `/pods` or `/tokenreviews`. */
  readonly path?: string;
  /** Skip watch requests (default false: a watch request counts too). */
  readonly exceptWatch?: boolean;
  /** Only watch requests. */
  readonly onlyWatch?: boolean;
  /** Query parameters the request must carry with exactly these (decoded) values, e.g. `{ fieldSelector: 'spec.nodeName=node-1' }`. */
  readonly query?: Readonly<Record<string, string>>;
}

interface PendingFailure {
  remaining: number;
  readonly make: () => ApiError;
  readonly match: FaultMatch;
  /** Further condition on the request (e.g. it carries a continue token). */
  readonly when?: (r: FaultRequest) => boolean;
}

export interface FaultRequest {
  readonly method: string;
  readonly path: string;
  readonly watch: boolean;
  readonly query?: URLSearchParams;
}

/** What the injector needs of the watch hub (see watch.ts). */
export interface SilenceableWatches {
  readonly open: Set<{ destroy(): void }>;
  /** The request each open watch came from. */
  readonly requests: WeakMap<object, FaultRequest>;
  /** Open watches that send nothing any more (no events, no bookmarks, never closed by the server). */
  readonly silenced: WeakSet<object>;
}

export interface Faults {
  /** Every API request waits this long before it is handled (0 = off). */
  setLatency(ms: number): void;
  /** The next `count` matching requests get 429 Too Many Requests with Retry-After. */
  failWith429(count: number, options?: { retryAfterSeconds?: number; match?: FaultMatch }): void;
  /** The next `count` matching requests get 500 InternalError. */
  failWith500(count: number, options?: { match?: FaultMatch }): void;
  /** The next `count` matching list requests that carry a `continue` token get 410 Expired (the snapshot is gone). */
  expireContinue(count: number, options?: { match?: FaultMatch }): void;
  /**
   * Matching open watches go silent: the connection stays open and nothing more is sent (no
   * events, no bookmarks, no end at timeoutSeconds), as from a hung replica. The next
   * `newWatches` matching watch requests (default 0) are accepted (200, headers) and are
   * silent from the start. Returns how many open watches went silent.
   */
  silenceWatches(options?: { newWatches?: number; match?: FaultMatch }): number;
  /** Destroys every open watch connection (clients see the stream break). Returns how many. */
  dropWatches(): number;
  /** Forgets history up to the current resourceVersion: watches from older RVs get 410 Gone. */
  compact(): void;
  /** Removes every pending fault (silences still to come included) and the latency; silent open watches stay silent. */
  clear(): void;
  /** Number of requests that were failed on purpose so far. */
  readonly injectedFailures: number;
  /** Number of open watch connections (silent ones included). */
  readonly openWatches: number;
}

function matches(m: FaultMatch, r: FaultRequest): boolean {
  if (m.method && m.method.toUpperCase() !== r.method) return false;
  if (m.path && !r.path.includes(m.path)) return false;
  if (m.exceptWatch && r.watch) return false;
  if (m.onlyWatch && !r.watch) return false;
  for (const [k, v] of Object.entries(m.query ?? {})) if (r.query?.get(k) !== v) return false;
  return true;
}

export class FaultInjector implements Faults {
  #latencyMs = 0;
  #pending: PendingFailure[] = [];
  #silences: Array<{ remaining: number; readonly match: FaultMatch }> = [];
  #injected = 0;
  readonly #store: ObjectStore;
  readonly #watches: SilenceableWatches;

  constructor(options: { store: ObjectStore; watches: SilenceableWatches }) {
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

  expireContinue(count: number, options: { match?: FaultMatch } = {}): void {
    this.#pending.push({
      remaining: count,
      make: () =>
        expired('The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.'),
      match: options.match ?? {},
      when: (r) => !r.watch && (r.query?.get('continue') ?? '') !== '',
    });
  }

  silenceWatches(options: { newWatches?: number; match?: FaultMatch } = {}): number {
    const match = options.match ?? {};
    let n = 0;
    for (const w of this.#watches.open) {
      const r = this.#watches.requests.get(w);
      if (r && matches(match, r) && !this.#watches.silenced.has(w)) {
        this.#watches.silenced.add(w);
        n++;
      }
    }
    if ((options.newWatches ?? 0) > 0) this.#silences.push({ remaining: options.newWatches!, match });
    return n;
  }

  dropWatches(): number {
    const all = [...this.#watches.open];
    for (const w of all) w.destroy();
    return all.length;
  }

  compact(): void {
    this.#store.compact();
  }

  clear(): void {
    this.#pending = [];
    this.#silences = [];
    this.#latencyMs = 0;
  }

  get injectedFailures(): number {
    return this.#injected;
  }

  get openWatches(): number {
    return this.#watches.open.size;
  }

  /** The failure this request must get, if any (consumes one from the matching fault). */
  takeFailure(r: FaultRequest): ApiError | undefined {
    const f = this.#pending.find((p) => p.remaining > 0 && matches(p.match, r) && (p.when?.(r) ?? true));
    if (!f) return undefined;
    f.remaining--;
    this.#pending = this.#pending.filter((p) => p.remaining > 0);
    this.#injected++;
    return f.make();
  }

  /** Whether this new watch must be silent from the start (consumes one from the matching silence). */
  takeSilence(r: FaultRequest): boolean {
    const s = this.#silences.find((p) => p.remaining > 0 && matches(p.match, r));
    if (!s) return false;
    s.remaining--;
    this.#silences = this.#silences.filter((p) => p.remaining > 0);
    return true;
  }
}
