/**
 * The one retrying keyed work queue, as client-go's workqueue is used by controllers (the CA's
 * root publication, the k8s-signer's CSR and PCR controllers, the CNI repair controller):
 * - `add(key)` queues a key once however often it is added, in arrival order; up to `workers`
 *   keys are processed at once, each key never twice at the same time (one added while it is
 *   processed is processed once more afterwards);
 * - `process(key)` resolves done (undefined), or `{ retry: why }` ("not yet, because ..."); a key
 *   whose processing says retry or throws comes back after a jittered (±20 %) doubling backoff on
 *   the injected clock, from `initialBackoffMs` and never longer than `maxBackoffMs`; a key has at
 *   most one retry armed; its failure count resets on success (and on `forget`);
 * - with `maxAttempts`, a key that failed that many times in a row is dropped with `onGiveUp`;
 *   a fresh `add` later starts counting again (its object changed: it deserves a new look);
 * - `stop()` drops what is queued and the armed retries, refuses new work and resolves once the
 *   keys in progress are done; `idle()` resolves once nothing is queued or in progress (retries
 *   waiting on the clock are not work yet).
 */
import type { Clock } from './clock.js';
import { describeError } from './errors.js';
import type { Logger } from './log.js';
import { jitter, type Rng } from './rng.js';

/** What processing a key came to: done (undefined), or not yet, and why (retried like a failure). */
export type WorkOutcome = void | { readonly retry: string };

export interface WorkQueueOptions<K> {
  readonly process: (key: K) => Promise<WorkOutcome>;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** Keys processed at once (default 1). */
  readonly workers?: number;
  /** First retry delay (default 500 ms), doubling per consecutive failure. */
  readonly initialBackoffMs?: number;
  /** Longest retry delay (default 30 s). */
  readonly maxBackoffMs?: number;
  /** Give a key up after this many consecutive failures (default never). */
  readonly maxAttempts?: number;
  /** Told when a key is given up: the last error (or why), and the failures counted. */
  readonly onGiveUp?: (key: K, err: unknown, attempts: number) => void;
  /** Told of each retry armed, with why (the error's description) and its delay (metrics). */
  readonly onRetry?: (key: K, why: string, delayMs: number) => void;
  /** What a key names, in logs (default "key"). */
  readonly what?: string;
}

const DEFAULTS = Object.freeze({ workers: 1, initialBackoffMs: 500, maxBackoffMs: 30_000 });

/** Delay before retry number `failures` (1-based): initial x2^(failures-1), ±20 %, capped. */
export function backoffDelayMs(failures: number, o: { readonly initialMs: number; readonly maxMs: number; readonly rng: Rng }): number {
  return Math.min(o.maxMs, jitter(o.initialMs * 2 ** Math.max(0, failures - 1), 0.2, o.rng));
}

export class WorkQueue<K> {
  readonly #o: WorkQueueOptions<K>;
  readonly #workers: number;
  readonly #queued = new Set<K>();
  readonly #active = new Set<K>();
  readonly #failures = new Map<K, number>();
  readonly #retrying = new Set<K>();
  readonly #work = new Set<Promise<void>>();
  readonly #stop = new AbortController();
  #idleWaiters: Array<() => void> = [];

  constructor(options: WorkQueueOptions<K>) {
    const workers = options.workers ?? DEFAULTS.workers;
    if (!Number.isInteger(workers) || workers < 1) throw new RangeError(`workers must be >= 1, got ${workers}`);
    this.#o = options;
    this.#workers = workers;
  }

  /** Keys waiting to start (not counting those in progress, nor retries armed on the clock). */
  get length(): number {
    let n = 0;
    for (const k of this.#queued) if (!this.#active.has(k)) n++;
    return n;
  }

  get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  /** Aborted by `stop()`: for the processing's own deadlines. */
  get signal(): AbortSignal {
    return this.#stop.signal;
  }

  /** Consecutive failures of `key` so far (0 after a success). */
  failures(key: K): number {
    return this.#failures.get(key) ?? 0;
  }

  add(key: K): void {
    if (this.stopped) return;
    this.#queued.add(key);
    this.#pump();
  }

  /** Forgets a key's failure count (its object is gone). */
  forget(key: K): void {
    this.#failures.delete(key);
  }

  /** Resolves once nothing is queued or being processed. */
  idle(): Promise<void> {
    if (this.#work.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Drops queued keys and armed retries; resolves when the keys in progress are done. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#queued.clear();
    await Promise.all([...this.#work]);
    this.#notifyIdle();
  }

  #pump(): void {
    while (this.#active.size < this.#workers && !this.stopped) {
      const key = this.#nextKey();
      if (key === undefined) break;
      this.#queued.delete(key);
      this.#active.add(key);
      const run = this.#run(key).finally(() => {
        this.#active.delete(key);
        this.#work.delete(run);
        this.#pump();
        if (this.#work.size === 0) this.#notifyIdle();
      });
      this.#work.add(run);
    }
  }

  #nextKey(): K | undefined {
    for (const k of this.#queued) if (!this.#active.has(k)) return k;
    return undefined;
  }

  async #run(key: K): Promise<void> {
    let why: string;
    let err: unknown;
    try {
      const outcome = await this.#o.process(key);
      if (!outcome) {
        this.#failures.delete(key);
        return;
      }
      why = outcome.retry;
      err = new Error(why);
    } catch (e) {
      why = describeError(e);
      err = e;
    }
    this.#failed(key, why, err);
  }

  #failed(key: K, why: string, err: unknown): void {
    const n = (this.#failures.get(key) ?? 0) + 1;
    if (this.#o.maxAttempts !== undefined && n >= this.#o.maxAttempts) {
      this.#failures.delete(key);
      this.#o.onGiveUp?.(key, err, n);
      return;
    }
    this.#failures.set(key, n);
    if (this.stopped || this.#retrying.has(key)) return;
    const delayMs = backoffDelayMs(n, {
      initialMs: this.#o.initialBackoffMs ?? DEFAULTS.initialBackoffMs,
      maxMs: this.#o.maxBackoffMs ?? DEFAULTS.maxBackoffMs,
      rng: this.#o.rng,
    });
    const what = this.#o.what ?? 'key';
    this.#o.onRetry?.(key, why, delayMs);
    this.#o.logger.warn(`${what} not done yet; retrying`, { [what]: String(key), failures: n, why, retryInMs: Math.round(delayMs) });
    this.#retrying.add(key);
    this.#o.clock.sleep(delayMs, this.#stop.signal).then(
      () => {
        this.#retrying.delete(key);
        this.add(key);
      },
      () => this.#retrying.delete(key),
    );
  }

  #notifyIdle(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }
}
