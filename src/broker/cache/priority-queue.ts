/**
 * A keyed priority queue: each key is queued at most once; pushing a key that is already queued
 * with a more urgent priority upgrades it (never downgrades). Ties are served first in, first out.
 * A binary heap with lazy deletion keeps push/pop at O(log n) for tens of thousands of keys.
 */

import { siftDown, siftUp } from './binary-heap.js';

export type FetchPriority = 'realtime' | 'warmup' | 'background';

const RANK: Record<FetchPriority, number> = { realtime: 0, warmup: 1, background: 2 };

/** True when `a` is more urgent than `b`. */
export function isMoreUrgent(a: FetchPriority, b: FetchPriority): boolean {
  return RANK[a] < RANK[b];
}

interface HeapItem<K> {
  readonly key: K;
  readonly rank: number;
  readonly seq: number;
}

export class KeyedPriorityQueue<K> {
  readonly #heap: HeapItem<K>[] = [];
  /** The live heap item per key; heap items not in this map are stale and skipped. */
  readonly #live = new Map<K, HeapItem<K>>();
  #seq = 0;

  get size(): number {
    return this.#live.size;
  }

  has(key: K): boolean {
    return this.#live.has(key);
  }

  priorityOf(key: K): FetchPriority | undefined {
    const item = this.#live.get(key);
    if (!item) return undefined;
    return (Object.keys(RANK) as FetchPriority[]).find((p) => RANK[p] === item.rank);
  }

  /** Queues `key`, or upgrades it if queued with a less urgent priority. Returns true if it changed anything. */
  push(key: K, priority: FetchPriority): boolean {
    const rank = RANK[priority];
    const current = this.#live.get(key);
    if (current && current.rank <= rank) return false;
    const item: HeapItem<K> = { key, rank, seq: this.#seq++ };
    this.#live.set(key, item);
    this.#heap.push(item);
    siftUp(this.#heap, this.#heap.length - 1, moreUrgent);
    return true;
  }

  /** Removes `key` if queued. */
  delete(key: K): boolean {
    return this.#live.delete(key);
  }

  /** Takes the most urgent key, or undefined when empty. */
  pop(): K | undefined {
    while (this.#heap.length > 0) {
      const top = this.#heap[0]!;
      const last = this.#heap.pop()!;
      if (this.#heap.length > 0) {
        this.#heap[0] = last;
        siftDown(this.#heap, 0, moreUrgent);
      }
      if (this.#live.get(top.key) === top) {
        this.#live.delete(top.key);
        return top.key;
      }
    }
    return undefined;
  }
}

function moreUrgent<K>(a: HeapItem<K>, b: HeapItem<K>): boolean {
  return a.rank < b.rank || (a.rank === b.rank && a.seq < b.seq);
}
