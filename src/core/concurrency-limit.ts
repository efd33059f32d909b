/**
 * At most `max` tasks running at once; the others wait in arrival order (FIFO) and start as
 * running ones settle. The queue is bounded by whoever calls `run` (the CA: its open calls). Pure.
 */
export class ConcurrencyLimit {
  readonly #max: number;
  readonly #waiting: Array<() => void> = [];
  #running = 0;

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`a concurrency limit must be a whole number >= 1, got ${max}`);
    this.#max = max;
  }

  /** Tasks running now. */
  get running(): number {
    return this.#running;
  }

  /** Tasks waiting for a turn. */
  get queued(): number {
    return this.#waiting.length;
  }

  /** Runs `task` once fewer than `max` run; settles as it does. */
  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running >= this.#max) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      // The slot passes straight to the next waiter (the count stays), or is freed.
      if (next) next();
      else this.#running--;
    }
  }
}
