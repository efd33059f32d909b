/**
 * A keyed work queue with bounded retries: a key queued twice is handled once; a failed key
 * comes back after exponential backoff (base x2^n, jittered, capped) until `maxAttempts`, then
 * is dropped with `onGiveUp`. A fresh `add` after a give-up starts counting again (the pod
 * changed, so it deserves a new look). One worker: handlers never run concurrently.
 * Time and randomness are injected.
 */
import type { Clock } from '../../core/clock.js';
import { jitter, type Rng } from '../../core/rng.js';

export interface RetryQueueOptions {
  readonly clock: Clock;
  readonly rng: Rng;
  readonly maxAttempts: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
  readonly handle: (key: string) => Promise<void>;
  readonly onGiveUp: (key: string, err: unknown, attempts: number) => void;
}

/** Delay before retry number `attempt` (1-based): base x2^(attempt-1), ±20 %, capped. */
export function retryDelayMs(attempt: number, options: { baseDelayMs: number; maxDelayMs: number; rng: Rng }): number {
  const raw = options.baseDelayMs * 2 ** Math.max(0, attempt - 1);
  return Math.min(options.maxDelayMs, jitter(raw, 0.2, options.rng));
}

export class RetryQueue {
  readonly #o: RetryQueueOptions;
  readonly #queued = new Set<string>();
  readonly #order: string[] = [];
  readonly #attempts = new Map<string, number>();
  readonly #retrying = new Set<string>();
  #wake: (() => void) | undefined;
  #signal: AbortSignal | undefined;

  constructor(options: RetryQueueOptions) {
    this.#o = options;
  }

  /** Keys waiting to be handled now (not counting backoff timers). */
  get length(): number {
    return this.#order.length;
  }

  add(key: string): void {
    if (this.#queued.has(key)) return;
    this.#queued.add(key);
    this.#order.push(key);
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }

  /** Handles keys until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    this.#signal = signal;
    while (!signal.aborted) {
      const key = this.#order.shift();
      if (key === undefined) {
        await new Promise<void>((resolve) => {
          const done = () => {
            signal.removeEventListener('abort', done);
            resolve();
          };
          this.#wake = done;
          signal.addEventListener('abort', done, { once: true });
        });
        continue;
      }
      this.#queued.delete(key);
      try {
        await this.#o.handle(key);
        this.#attempts.delete(key);
      } catch (err) {
        this.#failed(key, err);
      }
    }
  }

  #failed(key: string, err: unknown): void {
    const attempts = (this.#attempts.get(key) ?? 0) + 1;
    if (attempts >= this.#o.maxAttempts) {
      this.#attempts.delete(key);
      this.#o.onGiveUp(key, err, attempts);
      return;
    }
    this.#attempts.set(key, attempts);
    if (this.#retrying.has(key)) return;
    this.#retrying.add(key);
    const delay = retryDelayMs(attempts, { baseDelayMs: this.#o.baseDelayMs, maxDelayMs: this.#o.maxDelayMs, rng: this.#o.rng });
    this.#o.clock
      .sleep(delay, this.#signal)
      .then(() => {
        this.#retrying.delete(key);
        this.add(key);
      })
      .catch(() => this.#retrying.delete(key));
  }
}
