/**
 * A bounded string-keyed map that forgets what has not been used lately, without a cliff: two
 * generations of entries, `young` and `old`. New entries and hits found in `old` go into
 * `young`; when `young` reaches the limit it becomes `old` and the previous `old` is dropped.
 * So an entry used at least once per `limit` insertions is never forgotten (a working set up to
 * `limit` keys hits on every call once warm, however it is cycled through), at most 2 x `limit`
 * entries are held, and no moment empties the whole map (a map cleared when full turns a working
 * set just above its cap into a miss on every call). Each operation is one or two Map lookups.
 *
 * The node authorizer keeps its parsed requested identities here (node-authorizer.ts); its limit
 * can follow the cluster (`setLimit`), so a cluster's distinct identities keep fitting.
 */
export class RecentMap<V> {
  #young = new Map<string, V>();
  #old = new Map<string, V>();
  #limit: number;

  constructor(limit: number) {
    this.#limit = Math.max(1, Math.floor(limit));
  }

  /** Entries held now (both generations; a key promoted from the old one may be counted twice, so this is an upper bound). */
  get size(): number {
    return this.#young.size + this.#old.size;
  }

  get limit(): number {
    return this.#limit;
  }

  /** A new limit for the young generation; takes effect from the next insertion. */
  setLimit(limit: number): void {
    this.#limit = Math.max(1, Math.floor(limit));
  }

  get(key: string): V | undefined {
    const young = this.#young.get(key);
    if (young !== undefined) return young;
    const old = this.#old.get(key);
    if (old !== undefined) this.#put(key, old);
    return old;
  }

  set(key: string, value: V): void {
    if (this.#young.has(key)) this.#young.set(key, value);
    else this.#put(key, value);
  }

  #put(key: string, value: V): void {
    if (this.#young.size >= this.#limit) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(key, value);
  }
}
