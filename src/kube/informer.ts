/**
 * A small list+watch informer on @kubernetes/client-node's `Watch`, written because client-node's
 * own `makeInformer` stops for good on a non-410 watch error (a dropped connection, a 500) and on
 * a failed list. This one lists, then watches from the list's resourceVersion with bookmarks;
 * re-lists on 410 Gone (ERROR event or status); reconnects after drops and errors with jittered
 * exponential backoff (at least a 429's Retry-After); diffs a re-list against its cache so
 * callbacks see exactly the adds, updates and deletes that happened. `synced` turns true after
 * the first complete list and stays true across reconnects. Time and randomness are parameters.
 */
import { Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { systemClock, type Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/log.js';
import { jitter, systemRng, type Rng } from '../core/rng.js';
import { KubeError } from './errors.js';

export interface ListResult<T> {
  readonly items: T[];
  readonly metadata?: { readonly resourceVersion?: string };
}

export interface Selectors {
  readonly fieldSelector?: string;
  readonly labelSelector?: string;
}

export interface InformerHandlers<T> {
  readonly onAdd?: (obj: T) => void;
  readonly onUpdate?: (obj: T, old: T) => void;
  readonly onDelete?: (obj: T) => void;
  /** Called on each list/watch failure before the informer backs off and retries. */
  readonly onError?: (err: unknown) => void;
}

export interface InformerOptions<T> extends Selectors, InformerHandlers<T> {
  readonly kubeConfig: KubeConfig;
  /** Watch path, e.g. `/api/v1/pods` or `/api/v1/namespaces/x/pods`. */
  readonly path: string;
  readonly list: (selectors: Selectors) => Promise<ListResult<T>>;
  readonly clock?: Clock;
  readonly rng?: Rng;
  readonly logger?: Logger;
  /** First retry delay; doubles per consecutive failure up to `maxBackoffMs` (±20 % jitter). */
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
  /** Asks the server to end each watch after this long (then the informer re-watches). */
  readonly watchTimeoutSeconds?: number;
}

interface WatchEnd {
  readonly err: unknown;
  readonly gone: boolean;
}

function keyOf(o: KubernetesObject): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

/** Retry-After (seconds) from a client-node ApiException, in milliseconds. */
function retryAfterMs(err: unknown): number | undefined {
  const headers = (err as { headers?: Record<string, string | undefined> } | null)?.headers;
  const raw = headers?.['retry-after'] ?? headers?.['Retry-After'];
  if (raw === undefined || !/^\d+$/.test(raw.trim())) return undefined;
  return Math.min(Number(raw) * 1000, 10 * 60 * 1000);
}

function stoppedBeforeSync(): KubeError {
  return new KubeError('ERR_KUBE_INFORMER_STOPPED', 'informer stopped before sync', { status: 'cancelled' });
}

function isGone(err: unknown): boolean {
  const e = err as { statusCode?: number; code?: number } | null;
  return e?.statusCode === 410 || e?.code === 410;
}

export class Informer<T extends KubernetesObject> {
  readonly #o: InformerOptions<T>;
  readonly #clock: Clock;
  readonly #rng: Rng;
  readonly #logger: Logger;
  readonly #watch: Watch;
  readonly #cache = new Map<string, T>();
  readonly #stop = new AbortController();
  #resourceVersion = '';
  #synced = false;
  /** Callers of waitForSync() before the first list: settled by the first list or by stop(). */
  #syncWaiters: Array<{ resolve: () => void; reject: (err: KubeError) => void }> = [];
  #failures = 0;
  #running: Promise<void> | undefined;
  #current: AbortController | undefined;
  #relists = 0;
  #watches = 0;

  constructor(options: InformerOptions<T>) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#rng = options.rng ?? systemRng;
    this.#logger = options.logger ?? silentLogger;
    this.#watch = new Watch(options.kubeConfig);
  }

  get synced(): boolean {
    return this.#synced;
  }

  /** Resource version the informer has seen up to. */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** How many complete lists and how many watch requests so far (for tests and metrics). */
  get stats(): { lists: number; watches: number; consecutiveFailures: number } {
    return { lists: this.#relists, watches: this.#watches, consecutiveFailures: this.#failures };
  }

  list(): T[] {
    return [...this.#cache.values()];
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(`${namespace ?? ''}/${name}`);
  }

  /** Starts the list/watch loop (idempotent). */
  start(): void {
    if (this.#running || this.#stop.signal.aborted) return;
    this.#running = this.#loop().catch((err: unknown) => {
      if (!this.#stop.signal.aborted) this.#logger.error('informer loop ended unexpectedly', { path: this.#o.path, err: describeError(err) });
    });
  }

  /**
   * Resolves once the first list is in the cache; rejects if the informer is stopped first. A
   * pending call holds only its entry in a list that the first list or stop() empties: no
   * listener per call, so any number of callers leaves nothing behind.
   */
  waitForSync(): Promise<void> {
    if (this.#synced) return Promise.resolve();
    if (this.#stop.signal.aborted) return Promise.reject(stoppedBeforeSync());
    return new Promise((resolve, reject) => {
      this.#syncWaiters.push({ resolve, reject });
    });
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    for (const w of this.#syncWaiters.splice(0)) w.reject(stoppedBeforeSync());
    this.#current?.abort();
    await this.#running;
  }

  async #loop(): Promise<void> {
    const signal = this.#stop.signal;
    while (!signal.aborted) {
      try {
        if (this.#resourceVersion === '') await this.#relist();
        const end = await this.#watchOnce();
        if (signal.aborted) return;
        if (end.gone) {
          this.#logger.info('watch history expired, re-listing', { path: this.#o.path });
          this.#resourceVersion = '';
          continue;
        }
        if (end.err === null || end.err === undefined) {
          // The server closed the stream (timeout): carry on from where we are.
          continue;
        }
        throw end.err;
      } catch (err) {
        if (signal.aborted) return;
        if (isGone(err)) {
          this.#resourceVersion = '';
          continue;
        }
        this.#failures++;
        this.#o.onError?.(err);
        const base = Math.min((this.#o.initialBackoffMs ?? 200) * 2 ** (this.#failures - 1), this.#o.maxBackoffMs ?? 30_000);
        // A 429/503 with Retry-After is the server asking for at least that long.
        const delay = Math.max(jitter(base, 0.2, this.#rng), retryAfterMs(err) ?? 0);
        this.#logger.warn('list/watch failed, retrying', { path: this.#o.path, attempt: this.#failures, delayMs: Math.round(delay), err: describeError(err) });
        try {
          await this.#clock.sleep(delay, signal);
        } catch {
          return;
        }
      }
    }
  }

  async #relist(): Promise<void> {
    const res = await this.#o.list({
      ...(this.#o.fieldSelector ? { fieldSelector: this.#o.fieldSelector } : {}),
      ...(this.#o.labelSelector ? { labelSelector: this.#o.labelSelector } : {}),
    });
    if (this.#stop.signal.aborted) return;
    this.#relists++;
    const fresh = new Map<string, T>();
    for (const item of res.items) fresh.set(keyOf(item), item);
    for (const [k, old] of [...this.#cache]) {
      if (!fresh.has(k)) {
        this.#cache.delete(k);
        this.#emit(() => this.#o.onDelete?.(old));
      }
    }
    for (const [k, item] of fresh) this.#upsert(k, item);
    this.#resourceVersion = res.metadata?.resourceVersion ?? '';
    this.#failures = 0;
    if (!this.#synced) {
      this.#synced = true;
      for (const w of this.#syncWaiters.splice(0)) w.resolve();
    }
  }

  #upsert(k: string, item: T): void {
    const old = this.#cache.get(k);
    this.#cache.set(k, item);
    if (!old) this.#emit(() => this.#o.onAdd?.(item));
    else if (old.metadata?.resourceVersion !== item.metadata?.resourceVersion || old.metadata?.uid !== item.metadata?.uid) {
      this.#emit(() => this.#o.onUpdate?.(item, old));
    }
  }

  #emit(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#logger.error('informer handler threw', { path: this.#o.path, err: describeError(err) });
    }
  }

  #watchOnce(): Promise<WatchEnd> {
    return new Promise<WatchEnd>((resolve) => {
      let gone = false;
      let settled = false;
      const finish = (err: unknown) => {
        if (settled) return;
        settled = true;
        resolve({ err, gone: gone || isGone(err) });
      };
      const query: Record<string, string | boolean | number> = { resourceVersion: this.#resourceVersion, allowWatchBookmarks: true };
      if (this.#o.fieldSelector) query.fieldSelector = this.#o.fieldSelector;
      if (this.#o.labelSelector) query.labelSelector = this.#o.labelSelector;
      if (this.#o.watchTimeoutSeconds) query.timeoutSeconds = this.#o.watchTimeoutSeconds;
      this.#watches++;
      this.#watch
        .watch(
          this.#o.path,
          query,
          (type: string, obj: unknown) => {
            const o = obj as T & { code?: number };
            switch (type) {
              case 'ADDED':
              case 'MODIFIED':
                this.#upsert(keyOf(o), o);
                break;
              case 'DELETED': {
                const k = keyOf(o);
                const old = this.#cache.get(k);
                this.#cache.delete(k);
                if (old) this.#emit(() => this.#o.onDelete?.(o));
                break;
              }
              case 'BOOKMARK':
                break;
              case 'ERROR':
                // 410 Gone: our resourceVersion was compacted away; anything else: start over too.
                gone = true;
                return;
              default:
                return;
            }
            this.#failures = 0;
            const rv = o.metadata?.resourceVersion;
            if (rv) this.#resourceVersion = rv;
          },
          finish,
        )
        .then((controller) => {
          this.#current = controller;
          if (this.#stop.signal.aborted) controller.abort();
        })
        .catch(finish);
    });
  }
}
