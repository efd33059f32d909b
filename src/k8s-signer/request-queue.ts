/**
 * The work queue of a signing controller: request keys in arrival order, handled up to
 * `workers` at a time and each key once at a time (a key queued while it is handled runs again
 * after), and a handler that answers "done" or "retry, because ..." — a retry comes back after a
 * jittered doubling delay on the injected clock. `stop()` refuses new work and waits for the
 * handlers running.
 */
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { jitter, type Rng } from '../core/rng.js';

export type HandleOutcome = { readonly done: true } | { readonly done: false; readonly why: string };

export interface RequestQueueOptions {
  readonly workers: number;
  readonly initialRetryMs: number;
  readonly maxRetryMs: number;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** What a key names, in logs ("pcr"). */
  readonly what: string;
  readonly handle: (key: string) => Promise<HandleOutcome>;
  /** Told of each retry (metrics). */
  readonly onRetry?: (key: string, why: string, delayMs: number) => void;
}

export class RequestQueue {
  readonly #o: RequestQueueOptions;
  readonly #stop = new AbortController();
  readonly #queue = new Set<string>();
  readonly #active = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #work = new Set<Promise<void>>();

  constructor(options: RequestQueueOptions) {
    this.#o = options;
  }

  get stopped(): boolean {
    return this.#stop.signal.aborted;
  }

  /** Aborted by `stop()`: for the handlers' deadlines. */
  get signal(): AbortSignal {
    return this.#stop.signal;
  }

  add(key: string): void {
    if (key === '' || this.stopped) return;
    this.#queue.add(key);
    this.#pump();
  }

  /** Forgets a key's failure count (its object is gone). */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  /** Stops taking work; resolves when the handlers running now are done. */
  async stop(): Promise<void> {
    this.#stop.abort();
    await Promise.all([...this.#work]);
  }

  #pump(): void {
    while (this.#active.size < this.#o.workers && !this.stopped) {
      const key = [...this.#queue].find((k) => !this.#active.has(k));
      if (key === undefined) return;
      this.#queue.delete(key);
      this.#active.add(key);
      const run = this.#run(key)
        .catch((err: unknown) => this.#o.logger.error(`${this.#o.what} handling threw`, { [this.#o.what]: key, err: describeError(err) }))
        .finally(() => {
          this.#active.delete(key);
          this.#work.delete(run);
          this.#pump();
        });
      this.#work.add(run);
    }
  }

  async #run(key: string): Promise<void> {
    const outcome = await this.#o.handle(key);
    if (outcome.done) {
      this.#failures.delete(key);
      return;
    }
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    const delay = jitter(Math.min(this.#o.maxRetryMs, this.#o.initialRetryMs * 2 ** (n - 1)), 0.2, this.#o.rng);
    this.#o.onRetry?.(key, outcome.why, delay);
    this.#o.logger.warn(`${this.#o.what} not done yet; retrying`, { [this.#o.what]: key, why: outcome.why, retryInMs: Math.round(delay) });
    void this.#o.clock.sleep(delay, this.#stop.signal).then(
      () => this.add(key),
      () => undefined,
    );
  }
}
