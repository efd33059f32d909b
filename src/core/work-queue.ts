/**
 * A keyed work queue with one worker, as client-go's workqueue is used by controllers: `add(key)`
 * queues a key once however often it is added; a key added while it is being processed is
 * processed once more afterwards (never twice at the same time); a key whose processing throws
 * is retried after a jittered (±20 %) exponential backoff on the injected clock (from
 * `initialBackoffMs`, doubling to `maxBackoffMs`), and its failure count resets on success.
 * `stop()` drops what is queued and ends the worker; `idle()` resolves once nothing is queued or
 * in progress (retries waiting on the clock do not count: they are not work yet).
 */
import type { Clock } from './clock.js';
import { describeError } from './errors.js';
import type { Logger } from './log.js';
import { jitter, type Rng } from './rng.js';

export interface WorkQueueOptions<K> {
  readonly process: (key: K) => Promise<void>;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

const WORK_QUEUE_DEFAULTS = Object.freeze({ initialBackoffMs: 500, maxBackoffMs: 30_000 });

export class WorkQueue<K> {
  readonly #o: WorkQueueOptions<K>;
  readonly #queued = new Set<K>();
  readonly #failures = new Map<K, number>();
  readonly #stop = new AbortController();
  #current: K | undefined;
  #again = false;
  #working: Promise<void> | undefined;
  #idleWaiters: Array<() => void> = [];

  constructor(options: WorkQueueOptions<K>) {
    this.#o = options;
  }

  /** Queued keys (not counting the one in progress). */
  get length(): number {
    return this.#queued.size;
  }

  /** Consecutive failures of `key` so far (0 after a success). */
  failures(key: K): number {
    return this.#failures.get(key) ?? 0;
  }

  add(key: K): void {
    if (this.#stop.signal.aborted) return;
    if (this.#current !== undefined && this.#current === key) this.#again = true;
    else this.#queued.add(key);
    this.#kick();
  }

  #kick(): void {
    if (this.#working !== undefined || this.#stop.signal.aborted) return;
    this.#working = this.#drain().finally(() => {
      this.#working = undefined;
      if (this.#queued.size > 0 && !this.#stop.signal.aborted) this.#kick();
      else this.#notifyIdle();
    });
  }

  /** Resolves once nothing is queued or being processed. */
  idle(): Promise<void> {
    if (this.#working === undefined) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Drops queued keys and pending retries; resolves when the key in progress is done. */
  async stop(): Promise<void> {
    this.#stop.abort();
    this.#queued.clear();
    await this.#working;
    this.#notifyIdle();
  }

  #notifyIdle(): void {
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const w of waiters) w();
  }

  async #drain(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      const next = this.#queued.values().next();
      if (next.done) return;
      const key = next.value;
      this.#queued.delete(key);
      this.#current = key;
      this.#again = false;
      try {
        await this.#o.process(key);
        this.#failures.delete(key);
      } catch (err) {
        this.#retryLater(key, err);
      } finally {
        this.#current = undefined;
      }
      if (this.#again) this.#queued.add(key);
    }
  }

  #retryLater(key: K, err: unknown): void {
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    const initial = this.#o.initialBackoffMs ?? WORK_QUEUE_DEFAULTS.initialBackoffMs;
    const max = this.#o.maxBackoffMs ?? WORK_QUEUE_DEFAULTS.maxBackoffMs;
    const delayMs = jitter(Math.min(initial * 2 ** (n - 1), max), 0.2, this.#o.rng);
    this.#o.logger.warn('work failed, retrying', { key: String(key), failures: n, delayMs: Math.round(delayMs), error: describeError(err) });
    this.#o.clock.sleep(delayMs, this.#stop.signal).then(
      () => this.add(key),
      () => undefined,
    );
  }
}
