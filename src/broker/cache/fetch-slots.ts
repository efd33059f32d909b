/**
 * The certificate manager's way to the CA: a keyed priority queue of identities in front of at
 * most `max` calls running at once, with the counters metrics and benchmarks read. A key is
 * queued at most once (queueing it again only upgrades its priority). Plain TypeScript.
 */
import { KeyedPriorityQueue, type FetchPriority } from './priority-queue.js';

export class FetchSlots<K> {
  readonly #queue = new KeyedPriorityQueue<K>();
  readonly #max: number;
  #running = 0;
  #peak = 0;
  #started = 0;

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxConcurrentFetches must be >= 1, got ${max}`);
    this.#max = max;
  }

  /** Calls running now. */
  get running(): number {
    return this.#running;
  }

  /** Highest number of calls running at once so far. */
  get peak(): number {
    return this.#peak;
  }

  /** Calls started so far. */
  get started(): number {
    return this.#started;
  }

  /** Keys waiting for a slot. */
  get queued(): number {
    return this.#queue.size;
  }

  has(key: K): boolean {
    return this.#queue.has(key);
  }

  push(key: K, priority: FetchPriority): void {
    this.#queue.push(key, priority);
  }

  delete(key: K): void {
    this.#queue.delete(key);
  }

  /**
   * When a slot is free: takes the most urgent queued key that `resolve` still knows (skipping
   * the others), counts its call as running and returns what `resolve` gave; otherwise undefined.
   */
  take<V>(resolve: (key: K) => V | undefined): V | undefined {
    while (this.#running < this.#max) {
      const key = this.#queue.pop();
      if (key === undefined) return undefined;
      const value = resolve(key);
      if (value === undefined) continue;
      this.#running++;
      this.#started++;
      if (this.#running > this.#peak) this.#peak = this.#running;
      return value;
    }
    return undefined;
  }

  /** A call counted by `take` ended. */
  release(): void {
    this.#running--;
  }
}
