/**
 * A sorted set of string keys (UTF-16 code-unit order, as etcd orders its byte keys for ASCII
 * names) kept in chunks of at most CHUNK keys: insert and delete touch one chunk, a seek is two
 * binary searches, so a list page is O(log n + limit) instead of a copy and sort of the store.
 * `rank` (keys below a bound) walks the chunk sizes, for a page's remainingItemCount.
 */
const CHUNK = 512;

export class OrderedKeys {
  #chunks: string[][] = [];
  #size = 0;

  get size(): number {
    return this.#size;
  }

  /** Index of the first chunk whose last key is >= key (chunks.length when none). */
  #chunkFor(key: string): number {
    let lo = 0;
    let hi = this.#chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const c = this.#chunks[mid]!;
      if (c[c.length - 1]! < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Adds `key`; false when it was there already. */
  add(key: string): boolean {
    if (this.#chunks.length === 0) {
      this.#chunks.push([key]);
      this.#size = 1;
      return true;
    }
    let ci = this.#chunkFor(key);
    if (ci === this.#chunks.length) ci--; // above every key: the last chunk takes it
    const c = this.#chunks[ci]!;
    const i = lowerBound(c, key);
    if (c[i] === key) return false;
    c.splice(i, 0, key);
    this.#size++;
    if (c.length > CHUNK) this.#chunks.splice(ci + 1, 0, c.splice(c.length >>> 1));
    return true;
  }

  /** Removes `key`; false when it was not there. */
  delete(key: string): boolean {
    const ci = this.#chunkFor(key);
    const c = this.#chunks[ci];
    if (c === undefined) return false;
    const i = lowerBound(c, key);
    if (c[i] !== key) return false;
    c.splice(i, 1);
    this.#size--;
    if (c.length === 0) this.#chunks.splice(ci, 1);
    return true;
  }

  /** How many keys are strictly below `key`. */
  rank(key: string): number {
    const ci = this.#chunkFor(key);
    let n = 0;
    for (let j = 0; j < ci; j++) n += this.#chunks[j]!.length;
    const c = this.#chunks[ci];
    return c === undefined ? n : n + lowerBound(c, key);
  }

  /**
   * Keys in order from `start` (inclusive, or exclusive with `after`). Consume it before
   * changing the set: it walks the live chunks.
   */
  *from(start: string, after = false): Generator<string> {
    let ci = this.#chunkFor(start);
    const first = this.#chunks[ci];
    if (first === undefined) return;
    let i = lowerBound(first, start);
    if (after && first[i] === start) i++;
    for (; ci < this.#chunks.length; ci++, i = 0) {
      const c = this.#chunks[ci]!;
      for (; i < c.length; i++) yield c[i]!;
    }
  }
}

/** First index of `a` whose key is >= key. */
function lowerBound(a: readonly string[], key: string): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
