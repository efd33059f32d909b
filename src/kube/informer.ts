/**
 * The one list+watch informer of certbroker (the broker's node pod watch, the CA's pod index,
 * the repair controller). client-node's `makeInformer` is not used: it stops for good on a
 * dropped connection or a failed list, and it never notices a watch that stays open and silent.
 *
 * - List in pages (`limit`/`continue`); a 410 on a continue token (the snapshot expired)
 *   starts the list over. The fresh list is diffed against the cache, so callbacks see exactly
 *   the adds, updates and deletes that happened meanwhile.
 * - Watch from the list's resourceVersion with `allowWatchBookmarks=true` and a randomised
 *   `timeoutSeconds` in [min, 2×min) (as client-go), then re-watch from the last
 *   resourceVersion seen (events and bookmarks move it).
 * - Idle watchdog: a watch with no event and no bookmark for `idleTimeoutMs` is closed and
 *   re-opened from the last resourceVersion (logged); when the next one is silent too, the
 *   informer re-lists (a list is the only proof the API server still answers).
 * - 410 Gone (status or ERROR event) -> re-list (logged). Other errors -> jittered exponential
 *   backoff; a `Retry-After` (429, 503) is honoured on lists and on watches.
 * - `synced` once the first complete list is in; `problem()` is the readiness answer: not
 *   listed yet, or stale (nothing heard — no list, event or bookmark — for
 *   STALE_AFTER_IDLE_WINDOWS watchdog windows). `onHealthChange` tells when that answer turns
 *   (synced, gone stale, heard from again), so readiness follows events instead of polling.
 *
 * Time (watchdog, backoff) and randomness are parameters. HTTP goes through the KubeConfig's
 * own credentials and TLS (api-request.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { systemClock, type Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { silentLogger, type Logger } from '../core/log.js';
import { jitter, systemRng, type Rng } from '../core/rng.js';
import { kubeGet, readJson, type Query } from './api-request.js';
import { KubeApiError, KubeError } from './errors.js';
import { INFORMER_DEFAULTS, STALE_AFTER_IDLE_WINDOWS, type InformerSettings } from './informer-settings.js';

export interface Selectors {
  readonly fieldSelector?: string;
  readonly labelSelector?: string;
}

export interface InformerHandlers<T> {
  readonly onAdd?: (obj: T) => void;
  readonly onUpdate?: (obj: T, old: T) => void;
  readonly onDelete?: (obj: T) => void;
  /** Called on each list/watch failure before the informer backs off and retries (it logs them itself). */
  readonly onError?: (err: unknown) => void;
}

export interface InformerOptions<T> extends Selectors, InformerHandlers<T>, InformerSettings {
  readonly kubeConfig: KubeConfig;
  /** Collection path, e.g. `/api/v1/pods` or `/api/v1/namespaces/x/pods`. */
  readonly path: string;
  /** Name in logs and metrics (default: the last segment of `path`). */
  readonly resource?: string;
  /** Applied to every object before it is cached and handed to the callbacks (keep metadata). */
  readonly transform?: (obj: T) => T;
  readonly clock?: Clock;
  readonly rng?: Rng;
  readonly logger?: Logger;
}

/** Why a watch was re-opened: the `reason` label of `certbroker_informer_restarts_total`. */
export type RestartReason = 'watchdog' | '410' | 'error' | 'throttled' | 'timeout';
export const RESTART_REASONS: readonly RestartReason[] = ['watchdog', '410', 'error', 'throttled', 'timeout'];

export interface InformerStats {
  /** Complete lists. */
  readonly lists: number;
  /** List pages requested (successful ones). */
  readonly pages: number;
  /** Watch requests sent. */
  readonly watches: number;
  readonly consecutiveFailures: number;
  readonly restarts: Readonly<Record<RestartReason, number>>;
}

type WatchEnd = { readonly kind: 'gone' | 'idle' | 'closed' | 'stopped'; readonly events: number };

interface WatchEvent {
  readonly type?: unknown;
  readonly object?: unknown;
}

function keyOf(o: KubernetesObject): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}

function stoppedBeforeSync(): KubeError {
  return new KubeError('ERR_KUBE_INFORMER_STOPPED', 'informer stopped before sync', { status: 'cancelled' });
}

function stopped(): KubeError {
  return new KubeError('ERR_KUBE_INFORMER_STOPPED', 'informer stopped', { status: 'cancelled' });
}

function isGone(err: unknown): boolean {
  return err instanceof KubeApiError && err.httpStatus === 410;
}

function seconds(ms: number): number {
  return Math.round(ms / 100) / 10;
}

export class Informer<T extends KubernetesObject> {
  readonly #o: InformerOptions<T>;
  readonly #clock: Clock;
  readonly #rng: Rng;
  readonly #logger: Logger;
  readonly #resource: string;
  readonly #idleMs: number;
  readonly #cache = new Map<string, T>();
  readonly #stop = new AbortController();
  readonly #restartListeners = new Set<(reason: RestartReason) => void>();
  readonly #healthListeners = new Set<(problem: string | undefined) => void>();
  /** Whether the health listeners were last told "healthy" (undefined: told nothing yet). */
  #toldHealthy: boolean | undefined;
  /** The staleness timer's loop, while there are health listeners and the informer runs. */
  #staleLoop: Promise<void> | undefined;
  /** Wakes the staleness loop when the informer hears from the API server again. */
  #wakeOnHeard: (() => void) | undefined;
  #resourceVersion = '';
  #synced = false;
  /** Callers of waitForSync() before the first list: settled by the first list or by stop(). */
  #syncWaiters: Array<{ resolve: () => void; reject: (err: KubeError) => void }> = [];
  #failures = 0;
  /** Watches in a row that the watchdog closed without having seen anything. */
  #silentWatches = 0;
  #running: Promise<void> | undefined;
  /** When the informer last heard from the API server: a complete list, an event or a bookmark. */
  #lastHeardAt: number;
  #lastError: string | undefined;
  #stats = { lists: 0, pages: 0, watches: 0 };
  readonly #restarts: Record<RestartReason, number> = { watchdog: 0, '410': 0, error: 0, throttled: 0, timeout: 0 };

  constructor(options: InformerOptions<T>) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#rng = options.rng ?? systemRng;
    this.#resource = options.resource ?? options.path.split('/').filter((s) => s !== '').at(-1) ?? options.path;
    this.#logger = (options.logger ?? silentLogger).child({ informer: this.#resource });
    this.#idleMs = options.idleTimeoutMs ?? INFORMER_DEFAULTS.idleTimeoutMs;
    this.#lastHeardAt = this.#clock.now();
  }

  /** The name in logs and metrics. */
  get resource(): string {
    return this.#resource;
  }

  /** The first complete list is in (stays true across re-lists and re-watches). */
  get synced(): boolean {
    return this.#synced;
  }

  /** Resource version the informer has seen up to. */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  get stats(): InformerStats {
    return { ...this.#stats, consecutiveFailures: this.#failures, restarts: { ...this.#restarts } };
  }

  /** Milliseconds since the informer last heard from the API server (list, event or bookmark; since start before that). */
  lastEventAgeMs(): number {
    return Math.max(0, this.#clock.now() - this.#lastHeardAt);
  }

  /** Undefined while healthy; otherwise why the cache cannot be trusted (for readiness). */
  problem(): string | undefined {
    const lastError = this.#lastError === undefined ? '' : `; last error: ${this.#lastError}`;
    if (!this.#synced) return `${this.#resource} not listed yet${lastError}`;
    const age = this.lastEventAgeMs();
    if (age > STALE_AFTER_IDLE_WINDOWS * this.#idleMs) {
      return `${this.#resource} watch stale: no list, event or bookmark for ${seconds(age)} s (watchdog ${seconds(this.#idleMs)} s, ${this.#restarts.watchdog} watchdog restarts)${lastError}`;
    }
    return undefined;
  }

  /**
   * Calls `listener` with `problem()` whenever it turns from undefined to a reason or back: the
   * first complete list, nothing heard for the stale window (timed on the injected clock, armed
   * only while someone listens), hearing from the API server again. Returns an unsubscribe.
   */
  onHealthChange(listener: (problem: string | undefined) => void): () => void {
    this.#healthListeners.add(listener);
    if (this.#running) this.#startStaleLoop();
    return () => this.#healthListeners.delete(listener);
  }

  /** Calls `listener` on every restart with its reason (metrics). Returns an unsubscribe. */
  onRestart(listener: (reason: RestartReason) => void): () => void {
    this.#restartListeners.add(listener);
    return () => this.#restartListeners.delete(listener);
  }

  list(): T[] {
    return [...this.#cache.values()];
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(`${namespace ?? ''}/${name}`);
  }

  /** Starts the list/watch loop (idempotent); aborting `signal` stops it as `stop()` does. */
  start(signal?: AbortSignal): void {
    if (this.#running || this.#stop.signal.aborted) return;
    if (signal?.aborted) {
      void this.stop();
      return;
    }
    signal?.addEventListener('abort', () => void this.stop(), { once: true });
    this.#lastHeardAt = this.#clock.now();
    this.#running = this.#loop().catch((err: unknown) => {
      if (!this.#stop.signal.aborted) this.#logger.error('informer loop ended unexpectedly', { err: describeError(err) });
    });
    if (this.#healthListeners.size > 0) this.#startStaleLoop();
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

  /** Aborts the open request and the loop; resolves when the loop ended or after `deadlineMs`. */
  async stop(deadlineMs = 5000): Promise<void> {
    this.#stop.abort();
    this.#wakeOnHeard?.();
    for (const w of this.#syncWaiters.splice(0)) w.reject(stoppedBeforeSync());
    if (!this.#running) return;
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, deadlineMs);
      timer.unref();
    });
    await Promise.race([this.#running, deadline]);
    clearTimeout(timer);
  }

  /** A complete list, an event or a bookmark arrived at `atMs`: tell whoever waits for it. */
  #heard(atMs: number): void {
    this.#lastHeardAt = atMs;
    const wake = this.#wakeOnHeard;
    this.#wakeOnHeard = undefined;
    wake?.();
    if (this.#toldHealthy !== true && this.#healthListeners.size > 0) this.#tellHealth();
  }

  #tellHealth(): void {
    const problem = this.problem();
    const healthy = problem === undefined;
    if (healthy === this.#toldHealthy) return;
    this.#toldHealthy = healthy;
    for (const l of this.#healthListeners) {
      try {
        l(problem);
      } catch (err) {
        this.#logger.error('informer health listener threw', { err: describeError(err) });
      }
    }
  }

  #startStaleLoop(): void {
    this.#staleLoop ??= this.#watchStaleness()
      .catch((err: unknown) => this.#logger.error('informer staleness timer failed', { err: describeError(err) }))
      .finally(() => (this.#staleLoop = undefined));
  }

  /** Sleeps until the stale window would end, tells the listeners when it did, then waits to hear again. */
  async #watchStaleness(): Promise<void> {
    const windowMs = STALE_AFTER_IDLE_WINDOWS * this.#idleMs;
    while (!this.#stop.signal.aborted && this.#healthListeners.size > 0) {
      const wait = this.#lastHeardAt + windowMs - this.#clock.now();
      if (wait >= 0) {
        if (!(await this.#sleep(wait + 1))) return;
        continue;
      }
      this.#tellHealth();
      await new Promise<void>((resolve) => (this.#wakeOnHeard = resolve));
    }
  }

  #restarted(reason: RestartReason): void {
    this.#restarts[reason]++;
    for (const l of this.#restartListeners) {
      try {
        l(reason);
      } catch {
        // a metrics listener never stops the informer
      }
    }
  }

  #backoffMs(): number {
    const initial = this.#o.initialBackoffMs ?? INFORMER_DEFAULTS.initialBackoffMs;
    const max = this.#o.maxBackoffMs ?? INFORMER_DEFAULTS.maxBackoffMs;
    const base = Math.min(initial * 2 ** Math.max(0, this.#failures - 1), max);
    return jitter(base, 0.2, this.#rng);
  }

  /** Sleeps on the injected clock; false when stopped meanwhile. */
  async #sleep(ms: number): Promise<boolean> {
    try {
      await this.#clock.sleep(ms, this.#stop.signal);
      return true;
    } catch {
      return false;
    }
  }

  /** A 410 again right after a re-list: back off as after a failure (a server that always says Gone). */
  async #goneBackoff(): Promise<boolean> {
    this.#failures++;
    return this.#sleep(this.#backoffMs());
  }

  async #loop(): Promise<void> {
    const signal = this.#stop.signal;
    let needList = true;
    /** 410s in a row: the first re-lists at once, further ones back off (a server that always says Gone). */
    let gone = 0;
    while (!signal.aborted) {
      try {
        if (needList) {
          await this.#listAll(signal);
          if (signal.aborted) return;
          needList = false;
        }
        const end = await this.#watchOnce(signal);
        if (signal.aborted || end.kind === 'stopped') return;
        if (end.kind === 'gone') {
          gone++;
          this.#restarted('410');
          this.#logger.info('watch history expired (410 Gone), re-listing', { resourceVersion: this.#resourceVersion });
          needList = true;
          if (gone > 1 && !(await this.#goneBackoff())) return;
          continue;
        }
        gone = 0;
        if (end.kind === 'idle') {
          this.#silentWatches++;
          this.#restarted('watchdog');
          needList = this.#silentWatches >= 2;
          this.#logger.warn(needList ? 'watch silent again (no event or bookmark), re-listing' : 'watch silent (no event or bookmark), re-watching', {
            idleSeconds: seconds(this.#idleMs),
            resourceVersion: this.#resourceVersion,
            silentWatches: this.#silentWatches,
          });
          continue;
        }
        // The server ended the watch (its timeout): carry on from where we are. A watch that
        // ended without a single event backs off, so a server closing every watch at once is
        // not hammered.
        this.#restarted('timeout');
        this.#logger.debug('watch closed by the server, re-watching', { events: end.events, resourceVersion: this.#resourceVersion });
        if (end.events === 0) {
          this.#failures++;
          if (!(await this.#sleep(this.#backoffMs()))) return;
        }
      } catch (err) {
        if (signal.aborted) return;
        if (isGone(err)) {
          gone++;
          this.#restarted('410');
          this.#logger.info(needList ? 'list snapshot expired (410 Gone on continue), listing again' : 'watch history expired (410 Gone), re-listing', {
            err: describeError(err),
          });
          needList = true;
          if (gone > 1 && !(await this.#goneBackoff())) return;
          continue;
        }
        gone = 0;
        this.#failures++;
        this.#lastError = describeError(err);
        const retryAfterMs = err instanceof KubeApiError ? err.retryAfterMs : undefined;
        const throttled = err instanceof KubeApiError && err.httpStatus === 429;
        // A 429/503 with Retry-After is the server asking for at least that long.
        const delayMs = Math.max(this.#backoffMs(), retryAfterMs ?? 0);
        this.#restarted(throttled ? 'throttled' : 'error');
        try {
          this.#o.onError?.(err);
        } catch {
          // a reporting callback never stops the informer
        }
        this.#logger.warn(needList ? 'list failed, retrying' : 'watch failed, retrying', {
          attempt: this.#failures,
          delayMs: Math.round(delayMs),
          ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
          err: this.#lastError,
        });
        if (!(await this.#sleep(delayMs))) return;
      }
    }
  }

  #selectors(): Query {
    return {
      ...(this.#o.fieldSelector ? { fieldSelector: this.#o.fieldSelector } : {}),
      ...(this.#o.labelSelector ? { labelSelector: this.#o.labelSelector } : {}),
    };
  }

  #ingest(raw: T): T {
    return this.#o.transform ? this.#o.transform(raw) : raw;
  }

  /** One page, within the request deadline. */
  async #page(signal: AbortSignal, continueToken: string | undefined): Promise<{ items: T[]; resourceVersion: string; continueToken: string | undefined }> {
    const timeoutMs = this.#o.requestTimeoutMs ?? INFORMER_DEFAULTS.requestTimeoutMs;
    const what = `list ${this.#o.path}`;
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(new KubeError('ERR_KUBE_TIMEOUT', `${what}: no answer within ${timeoutMs} ms`, { status: 'deadline-exceeded' })), timeoutMs);
    timer.unref();
    const both = AbortSignal.any([signal, deadline.signal]);
    try {
      const query: Query = {
        ...this.#selectors(),
        limit: this.#o.pageSize ?? INFORMER_DEFAULTS.pageSize,
        ...(continueToken ? { continue: continueToken } : {}),
      };
      const res = await kubeGet(this.#o.kubeConfig, this.#o.path, query, { signal: both, nowMs: this.#clock.now(), what });
      const body = (await readJson(res, what, both)) as { items?: unknown; metadata?: { resourceVersion?: unknown; continue?: unknown } } | null;
      if (body === null || typeof body !== 'object' || !Array.isArray(body.items)) {
        throw new KubeError('ERR_KUBE_RESPONSE_INVALID', `${what}: the answer has no items`, { status: 'unavailable' });
      }
      const cont = body.metadata?.continue;
      const rv = body.metadata?.resourceVersion;
      return {
        items: body.items as T[],
        resourceVersion: typeof rv === 'string' ? rv : '',
        continueToken: typeof cont === 'string' && cont !== '' ? cont : undefined,
      };
    } finally {
      clearTimeout(timer);
    }
  }

  async #listAll(signal: AbortSignal): Promise<void> {
    const fresh = new Map<string, T>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    let pages = 0;
    do {
      const page = await this.#page(signal, continueToken);
      if (signal.aborted) return;
      this.#stats.pages++;
      pages++;
      for (const raw of page.items) {
        const item = this.#ingest(raw);
        fresh.set(keyOf(item), item);
      }
      continueToken = page.continueToken;
      resourceVersion = page.resourceVersion;
    } while (continueToken !== undefined);
    this.#stats.lists++;
    for (const [k, old] of [...this.#cache]) {
      if (!fresh.has(k)) {
        this.#cache.delete(k);
        this.#emit(() => this.#o.onDelete?.(old));
      }
    }
    for (const [k, item] of fresh) this.#upsert(k, item);
    this.#resourceVersion = resourceVersion;
    this.#failures = 0;
    this.#lastError = undefined;
    if (!this.#synced) {
      this.#synced = true;
      this.#logger.info('informer synced', { items: this.#cache.size, pages, resourceVersion });
      for (const w of this.#syncWaiters.splice(0)) w.resolve();
    } else {
      this.#logger.info('re-listed', { items: this.#cache.size, pages, resourceVersion });
    }
    this.#heard(this.#clock.now());
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
      this.#logger.error('informer handler threw', { err: describeError(err) });
    }
  }

  /**
   * Applies one watch event. Returns 'gone' for a 410 ERROR event, throws for any other ERROR
   * event, and undefined otherwise.
   */
  #apply(ev: WatchEvent): 'gone' | undefined {
    const type = ev.type;
    if (type === 'ERROR') {
      const s = (ev.object ?? {}) as { code?: unknown; reason?: unknown; message?: unknown };
      const code = typeof s.code === 'number' ? s.code : 500;
      if (code === 410) return 'gone';
      throw new KubeApiError({
        what: `watch ${this.#o.path}`,
        httpStatus: code,
        ...(typeof s.reason === 'string' ? { reason: s.reason } : {}),
        ...(typeof s.message === 'string' ? { detail: s.message.slice(0, 500) } : {}),
      });
    }
    const obj = ev.object as T | undefined;
    if (obj === undefined || obj === null || typeof obj !== 'object') return undefined;
    switch (type) {
      case 'ADDED':
      case 'MODIFIED': {
        const item = this.#ingest(obj);
        this.#upsert(keyOf(item), item);
        break;
      }
      case 'DELETED': {
        const k = keyOf(obj);
        const old = this.#cache.get(k);
        this.#cache.delete(k);
        if (old) {
          const item = this.#ingest(obj);
          this.#emit(() => this.#o.onDelete?.(item));
        }
        break;
      }
      case 'BOOKMARK':
        break;
      default:
        return undefined;
    }
    const rv = obj.metadata?.resourceVersion;
    if (rv) this.#resourceVersion = rv;
    return undefined;
  }

  /** One watch request, followed until the server ends it, it breaks, the watchdog fires or stop(). */
  async #watchOnce(signal: AbortSignal): Promise<WatchEnd> {
    const request = new AbortController();
    const onStop = () => request.abort(stopped());
    signal.addEventListener('abort', onStop, { once: true });
    let lastActivity = this.#clock.now();
    let events = 0;
    let idle = false;
    const dogOff = new AbortController();
    void (async () => {
      for (;;) {
        const wait = lastActivity + this.#idleMs - this.#clock.now();
        if (wait <= 0) {
          idle = true;
          request.abort(new KubeError('ERR_KUBE_TIMEOUT', `watch ${this.#o.path}: no event or bookmark for ${this.#idleMs} ms`, { status: 'deadline-exceeded' }));
          return;
        }
        await this.#clock.sleep(wait, dogOff.signal);
      }
    })().catch(() => undefined);
    const min = this.#o.minWatchTimeoutSeconds ?? INFORMER_DEFAULTS.minWatchTimeoutSeconds;
    const query: Query = {
      ...this.#selectors(),
      resourceVersion: this.#resourceVersion,
      allowWatchBookmarks: true,
      timeoutSeconds: Math.floor(min * (1 + this.#rng())),
    };
    try {
      this.#stats.watches++;
      let res: IncomingMessage;
      try {
        res = await kubeGet(this.#o.kubeConfig, this.#o.path, { ...query, watch: true }, { signal: request.signal, nowMs: this.#clock.now(), what: `watch ${this.#o.path}` });
      } catch (err) {
        if (signal.aborted) return { kind: 'stopped', events };
        if (idle) return { kind: 'idle', events };
        throw err;
      }
      return await new Promise<WatchEnd>((resolve, reject) => {
        let finished = false;
        let buffered = '';
        const finish = (fn: () => void) => {
          if (finished) return;
          finished = true;
          request.signal.removeEventListener('abort', onAbort);
          res.destroy();
          fn();
        };
        const onAbort = () => finish(() => resolve({ kind: signal.aborted ? 'stopped' : 'idle', events }));
        if (request.signal.aborted) {
          onAbort();
          return;
        }
        request.signal.addEventListener('abort', onAbort, { once: true });
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (finished) return;
          buffered += chunk;
          for (let nl = buffered.indexOf('\n'); nl >= 0 && !finished; nl = buffered.indexOf('\n')) {
            const line = buffered.slice(0, nl).trim();
            buffered = buffered.slice(nl + 1);
            if (line === '') continue;
            let ev: WatchEvent;
            try {
              ev = JSON.parse(line) as WatchEvent;
            } catch (err) {
              finish(() => reject(new KubeError('ERR_KUBE_RESPONSE_INVALID', `watch ${this.#o.path}: an event is not JSON`, { status: 'unavailable', cause: err })));
              return;
            }
            let outcome: 'gone' | undefined;
            try {
              outcome = this.#apply(ev);
            } catch (err) {
              finish(() => reject(err));
              return;
            }
            if (outcome === 'gone') {
              finish(() => resolve({ kind: 'gone', events }));
              return;
            }
            events++;
            lastActivity = this.#clock.now();
            this.#heard(lastActivity);
            this.#failures = 0;
            this.#silentWatches = 0;
            this.#lastError = undefined;
          }
        });
        res.on('end', () => finish(() => resolve({ kind: 'closed', events })));
        const broken = (err?: Error) =>
          finish(() => {
            if (request.signal.aborted) resolve({ kind: signal.aborted ? 'stopped' : 'idle', events });
            else reject(new KubeError('ERR_KUBE_UNREACHABLE', `watch ${this.#o.path}: the stream broke off${err ? `: ${err.message}` : ''}`, { status: 'unavailable', cause: err }));
          });
        res.on('error', broken);
        res.on('close', () => broken());
      });
    } finally {
      dogOff.abort();
      signal.removeEventListener('abort', onStop);
      request.abort();
    }
  }
}
