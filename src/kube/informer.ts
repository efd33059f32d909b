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
import { settleWithin, stopOnAbort, type LongLived } from '../core/long-lived.js';
import { silentLogger, type Logger } from '../core/log.js';
import { systemRng, type Rng } from '../core/rng.js';
import { kubeRequest, type Query } from './api-request.js';
import { KubeError } from './errors.js';
import { InformerHealth, seconds } from './informer-health.js';
import { InformerCache, type InformerHandlers, type InformerStore, type WatchEvent } from './informer-cache.js';
import { backoffMs, isGone, retryAfterFailure } from './informer-retry.js';
import { RestartCounts, type InformerStats, type RestartReason } from './informer-stats.js';
import { INFORMER_DEFAULTS, type InformerSettings } from './informer-settings.js';
import type { InformerOptions } from './informer-options.js';
import { listAllPages, type PageReader } from './list-page.js';
import { followWatch, startWatchdog, type WatchEnd } from './watch-stream.js';

export type { InformerHandlers, InformerStore } from './informer-cache.js';
export { RESTART_REASONS, type InformerStats, type RestartReason } from './informer-stats.js';
export type { InformerOptions, Selectors } from './informer-options.js';

function stoppedBeforeSync(): KubeError {
  return new KubeError('ERR_KUBE_INFORMER_STOPPED', 'informer stopped before sync', { status: 'cancelled' });
}

function stopped(): KubeError {
  return new KubeError('ERR_KUBE_INFORMER_STOPPED', 'informer stopped', { status: 'cancelled' });
}

/** How long `stop()` waits for the loop by default. */
export const INFORMER_STOP_DEADLINE_MS = 5000;

export class Informer<T extends KubernetesObject> implements LongLived {
  readonly #o: InformerOptions<T>;
  readonly #clock: Clock;
  readonly #rng: Rng;
  readonly #logger: Logger;
  readonly #resource: string;
  readonly #idleMs: number;
  readonly #cache: InformerStore<T>;
  readonly #stop = new AbortController();
  #resourceVersion = '';
  #synced = false;
  /** Callers of waitForSync() before the first list: settled by the first list or by stop(). */
  #syncWaiters: Array<{ resolve: () => void; reject: (err: KubeError) => void }> = [];
  #failures = 0;
  /** Watches in a row that the watchdog closed without having seen anything. */
  #silentWatches = 0;
  #running: Promise<void> | undefined;
  /** When the informer last heard from the API server, and who is told when problem() turns. */
  readonly #health: InformerHealth;
  #lastError: string | undefined;
  #stats = { lists: 0, pages: 0, watches: 0 };
  readonly #restarts = new RestartCounts();

  constructor(options: InformerOptions<T>) {
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#rng = options.rng ?? systemRng;
    this.#resource = options.resource ?? options.path.split('/').filter((s) => s !== '').at(-1) ?? options.path;
    this.#logger = (options.logger ?? silentLogger).child({ informer: this.#resource });
    this.#idleMs = options.idleTimeoutMs ?? INFORMER_DEFAULTS.idleTimeoutMs;
    this.#health = new InformerHealth({
      clock: this.#clock,
      idleMs: this.#idleMs,
      resource: this.#resource,
      state: () => ({ synced: this.#synced, lastError: this.#lastError, watchdogRestarts: this.#restarts.counts.watchdog }),
      stop: this.#stop.signal,
      logger: this.#logger,
    });
    const what = `watch ${options.path}`;
    this.#cache = options.store ? options.store(what) : new InformerCache<T>(options, options.transform, this.#logger, what);
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
    return { ...this.#stats, consecutiveFailures: this.#failures, restarts: this.#restarts.counts };
  }

  /** Milliseconds since the informer last heard from the API server (list, event or bookmark; since start before that). */
  lastEventAgeMs(): number {
    return this.#health.lastEventAgeMs();
  }

  /** Undefined while healthy; otherwise why the cache cannot be trusted (for readiness). */
  problem(): string | undefined {
    return this.#health.problem();
  }

  /**
   * Calls `listener` with `problem()` whenever it turns from undefined to a reason or back: the
   * first complete list, nothing heard for the stale window (timed on the injected clock, armed
   * only while someone listens), hearing from the API server again. Returns an unsubscribe.
   */
  onHealthChange(listener: (problem: string | undefined) => void): () => void {
    return this.#health.subscribe(listener, this.#running !== undefined);
  }

  /** Calls `listener` on every restart with its reason (metrics). Returns an unsubscribe. */
  onRestart(listener: (reason: RestartReason) => void): () => void {
    return this.#restarts.subscribe(listener);
  }

  list(): T[] {
    return this.#cache.list();
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.#cache.get(namespace, name);
  }

  /**
   * Starts the list/watch loop (idempotent); aborting `signal` stops it as `stop()` does.
   * Resolves at once: the loop runs in the background (`waitForSync()` waits for the first list).
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#running || this.#stop.signal.aborted) return;
    if (signal?.aborted) {
      void this.stop();
      return;
    }
    stopOnAbort(signal, () => this.stop());
    this.#health.restartWindow();
    this.#running = this.#loop().catch((err: unknown) => {
      if (!this.#stop.signal.aborted) this.#logger.error('informer loop ended unexpectedly', { err: describeError(err) });
    });
    this.#health.startTimer();
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

  /** Aborts the open request and the loop; resolves when the loop ended or after `deadlineMs` (default 5 s). */
  async stop(deadlineMs = INFORMER_STOP_DEADLINE_MS): Promise<void> {
    this.#stop.abort();
    this.#health.wake();
    for (const w of this.#syncWaiters.splice(0)) w.reject(stoppedBeforeSync());
    if (!this.#running) return;
    await settleWithin(this.#running, deadlineMs);
  }

  #backoffMs(): number {
    return backoffMs(this.#failures, this.#o, this.#rng);
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
          this.#restarts.record('410');
          this.#logger.info('watch history expired (410 Gone), re-listing', { resourceVersion: this.#resourceVersion });
          needList = true;
          if (gone > 1 && !(await this.#goneBackoff())) return;
          continue;
        }
        gone = 0;
        if (end.kind === 'idle') {
          this.#silentWatches++;
          this.#restarts.record('watchdog');
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
        this.#restarts.record('timeout');
        this.#logger.debug('watch closed by the server, re-watching', { events: end.events, resourceVersion: this.#resourceVersion });
        if (end.events === 0) {
          this.#failures++;
          if (!(await this.#sleep(this.#backoffMs()))) return;
        }
      } catch (err) {
        if (signal.aborted) return;
        if (isGone(err)) {
          gone++;
          this.#restarts.record('410');
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
        const { delayMs, retryAfterMs, reason } = retryAfterFailure(err, this.#backoffMs());
        this.#restarts.record(reason);
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

  async #listAll(signal: AbortSignal): Promise<void> {
    this.#cache.beginList();
    const listed = await listAllPages<T>(
      {
        kubeConfig: this.#o.kubeConfig,
        path: this.#o.path,
        query: { ...this.#selectors(), limit: this.#o.pageSize ?? INFORMER_DEFAULTS.pageSize },
        timeoutMs: this.#o.requestTimeoutMs ?? INFORMER_DEFAULTS.requestTimeoutMs,
        now: () => this.#clock.now(),
        signal,
        ...(this.#o.readPage ? { readPage: this.#o.readPage as PageReader<unknown> } : {}),
      },
      (items) => {
        this.#stats.pages++;
        for (const raw of items) this.#cache.listed(raw);
      },
    );
    if (listed === undefined) return;
    const { resourceVersion, pages } = listed;
    this.#stats.lists++;
    this.#cache.endList();
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
    this.#health.heard(this.#clock.now());
  }

  /** Applies one watch event to the cache; anything but a 410 counts as hearing from the server. */
  #onEvent(ev: WatchEvent, heard: (at: number) => void): 'gone' | undefined {
    const applied = this.#cache.apply(ev);
    if (applied === 'gone') return 'gone';
    if (applied.resourceVersion !== undefined) this.#resourceVersion = applied.resourceVersion;
    const now = this.#clock.now();
    heard(now);
    this.#health.heard(now);
    this.#failures = 0;
    this.#silentWatches = 0;
    this.#lastError = undefined;
    return undefined;
  }

  /** One watch request, followed until the server ends it, it breaks, the watchdog fires or stop(). */
  async #watchOnce(signal: AbortSignal): Promise<WatchEnd> {
    const what = `watch ${this.#o.path}`;
    const request = new AbortController();
    const onStop = () => request.abort(stopped());
    signal.addEventListener('abort', onStop, { once: true });
    let lastActivity = this.#clock.now();
    let idle = false;
    const dogOff = startWatchdog(this.#clock, this.#idleMs, () => lastActivity, () => {
      idle = true;
      request.abort(new KubeError('ERR_KUBE_TIMEOUT', `${what}: no event or bookmark for ${this.#idleMs} ms`, { status: 'deadline-exceeded' }));
    });
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
        res = await kubeRequest(this.#o.kubeConfig, this.#o.path, { ...query, watch: true }, { signal: request.signal, nowMs: this.#clock.now(), what });
      } catch (err) {
        if (signal.aborted) return { kind: 'stopped', events: 0 };
        if (idle) return { kind: 'idle', events: 0 };
        throw err;
      }
      return await followWatch(res, {
        request: request.signal,
        stop: signal,
        what,
        onEvent: (ev) => this.#onEvent(ev, (at) => (lastActivity = at)),
      });
    } finally {
      dogOff();
      signal.removeEventListener('abort', onStop);
      request.abort();
    }
  }
}
