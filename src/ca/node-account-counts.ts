/**
 * How many active pods (not Succeeded or Failed) each account has on each node, as ids
 * (compact-pod-index.ts interns nodes and (namespace, service account) pairs). The node
 * authorizer's per-call question, "does this account have an active pod on the caller's node",
 * is one probe of **that node's own** table: an open-addressing table with linear probing in a
 * region of its own (8 bytes per entry: account + 1, count; 0 = empty). A node runs some tens of
 * accounts, so its table is a few cache lines, and a node agent asking for the identities of its
 * node's pods one after another reads the same lines each time however large the cluster (one
 * table for the whole cluster put every (node, account) on a line of its own, a miss per call).
 * All nodes' tables are regions of one pooled Uint32Array, found through a per-node (offset,
 * entries) pair in another: a lookup reads that pair and then the table's line, instead of a
 * JS array slot, a typed-array object and its separate backing store (three dependent misses
 * for a node not in cache). A table that grows moves to a new region at the pool's end; the pool
 * is repacked when it is full. An entry whose count drops to zero is deleted by shifting the
 * probe run back (no tombstones), so churn does not fill a table.
 *
 * A caller that asks about one node again and again (the node authorizer, for a node agent's
 * node) can keep where that node's table is (`tableBase`, `tableEntries`) and probe it directly
 * (`countIn`), which skips the per-node pair: on a large cluster that pair's line is as cold as
 * the table's, so the kept place halves the misses of a warm call. A kept place is only valid
 * until the table moves, so a node can be `watch`ed: the next move of its table (it grew, or the
 * pool was repacked) calls `onWatchedMove` once and spends the mark.
 */

/** Entries of a node's first table (it doubles when more than MAX_LOAD of them are in use). */
const MIN_ENTRIES = 8;
const MAX_LOAD = 0.6;

function hash(account: number): number {
  let h = Math.imul(account + 1, 0x9e3779b1);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h >>> 0;
}

/** Entry index of `account` in the table of `entries` entries at word `base` of `t`, or -1. */
function find(t: Uint32Array, base: number, entries: number, account: number): number {
  const mask = entries - 1;
  const tag = account + 1;
  for (let i = hash(account) & mask; ; i = (i + 1) & mask) {
    const k = t[base + (i << 1)]!;
    if (k === tag) return i;
    if (k === 0) return -1;
  }
}

function insert(t: Uint32Array, base: number, entries: number, tag: number, count: number): void {
  const mask = entries - 1;
  let i = hash(tag - 1) & mask;
  while (t[base + (i << 1)] !== 0) i = (i + 1) & mask;
  t[base + (i << 1)] = tag;
  t[base + (i << 1) + 1] = count;
}

/** Empties entry `hole` of the table, moving later entries of its probe run back so every entry stays reachable from its home. */
function deleteEntry(t: Uint32Array, base: number, entries: number, hole: number): void {
  const mask = entries - 1;
  let i = hole;
  for (let j = (i + 1) & mask; t[base + (j << 1)] !== 0; j = (j + 1) & mask) {
    const home = hash(t[base + (j << 1)]! - 1) & mask;
    // The entry at j may stay when its home lies cyclically in (i, j].
    const stays = i <= j ? home > i && home <= j : home > i || home <= j;
    if (stays) continue;
    t[base + (i << 1)] = t[base + (j << 1)]!;
    t[base + (i << 1) + 1] = t[base + (j << 1) + 1]!;
    i = j;
  }
  t[base + (i << 1)] = 0;
  t[base + (i << 1) + 1] = 0;
}

export class NodeAccountCounts {
  /** Every node's table, each a region of 2 x entries words. */
  #pool = new Uint32Array(1024);
  /** Words of the pool handed out so far (regions of tables that grew are left behind until a repack). */
  #top = 0;
  /** Per node id: its table's first word and its entries (0: no table yet). */
  #where = new Uint32Array(256);
  /** Per node id: entries in use. */
  readonly #used: number[] = [];
  #size = 0;
  /** 1 for a node `watch`ed since its table last moved. */
  #watched = new Uint8Array(0);
  #watching = 0;
  readonly #onWatchedMove: () => void;

  constructor(onWatchedMove: () => void = () => {}) {
    this.#onWatchedMove = onWatchedMove;
  }

  /** Distinct (node, account) pairs with at least one active pod. */
  get size(): number {
    return this.#size;
  }

  /** Active pods of `account` on `node`. */
  count(node: number, account: number): number {
    const w = node << 1;
    if (w >= this.#where.length) return 0;
    const entries = this.#where[w + 1]!;
    if (entries === 0) return 0;
    const base = this.#where[w]!;
    const i = find(this.#pool, base, entries, account);
    return i < 0 ? 0 : this.#pool[base + (i << 1) + 1]!;
  }

  /** The first word of `node`'s table in the pool as it is now (valid until the table moves: see `watch`). */
  tableBase(node: number): number {
    const w = node << 1;
    return w < this.#where.length ? this.#where[w]! : 0;
  }

  /** Entries of `node`'s table (0: it has none yet). */
  tableEntries(node: number): number {
    const w = node << 1;
    return w < this.#where.length ? this.#where[w + 1]! : 0;
  }

  /** Active pods of `account` in the table at `base` of `entries` entries (as `tableBase`/`tableEntries` gave them since the last move). */
  countIn(base: number, entries: number, account: number): number {
    if (entries === 0) return 0;
    const i = find(this.#pool, base, entries, account);
    return i < 0 ? 0 : this.#pool[base + (i << 1) + 1]!;
  }

  /** Marks `node` so that the next move of its table (or its first table being placed) calls `onWatchedMove`. */
  watch(node: number): void {
    if (node < 0) return;
    if (node >= this.#watched.length) {
      const watched = new Uint8Array(Math.max(node + 1, this.#watched.length * 2, 64));
      watched.set(this.#watched);
      this.#watched = watched;
    }
    if (this.#watched[node] === 0) {
      this.#watched[node] = 1;
      this.#watching++;
    }
  }

  add(node: number, account: number): void {
    const w = node << 1;
    if (w >= this.#where.length || this.#where[w + 1] === 0) this.#place(node, MIN_ENTRIES);
    let base = this.#where[w]!;
    let entries = this.#where[w + 1]!;
    const found = find(this.#pool, base, entries, account);
    if (found >= 0) {
      this.#pool[base + (found << 1) + 1]!++;
      return;
    }
    const used = this.#used[node]! + 1;
    if (used > entries * MAX_LOAD) {
      this.#place(node, entries * 2);
      base = this.#where[w]!;
      entries = this.#where[w + 1]!;
    }
    insert(this.#pool, base, entries, account + 1, 1);
    this.#used[node] = used;
    this.#size++;
  }

  /** One active pod fewer; the entry goes when none is left. */
  remove(node: number, account: number): void {
    const w = node << 1;
    if (w >= this.#where.length) return;
    const entries = this.#where[w + 1]!;
    if (entries === 0) return;
    const base = this.#where[w]!;
    const i = find(this.#pool, base, entries, account);
    if (i < 0) return;
    if (--this.#pool[base + (i << 1) + 1]! > 0) return;
    deleteEntry(this.#pool, base, entries, i);
    this.#used[node]!--;
    this.#size--;
  }

  /** Gives `node` a new, empty-then-refilled table of `entries` entries at the pool's end (its old region, if any, is left behind). */
  #place(node: number, entries: number): void {
    const w = node << 1;
    if (w >= this.#where.length) {
      const where = new Uint32Array(Math.max(w + 2, this.#where.length * 2));
      where.set(this.#where);
      this.#where = where;
    }
    while (this.#used.length <= node) this.#used.push(0);
    const words = entries * 2;
    if (this.#top + words > this.#pool.length) this.#repack(words);
    const oldBase = this.#where[w]!;
    const oldEntries = this.#where[w + 1]!;
    const base = this.#top;
    this.#top += words;
    const pool = this.#pool;
    for (let o = 0; o < oldEntries * 2; o += 2) if (pool[oldBase + o] !== 0) insert(pool, base, entries, pool[oldBase + o]!, pool[oldBase + o + 1]!);
    this.#where[w] = base;
    this.#where[w + 1] = entries;
    this.#moved(node);
  }

  /** `node`'s table moved: a watched node's mark is spent and the owner told. */
  #moved(node: number): void {
    if (node >= this.#watched.length || this.#watched[node] === 0) return;
    this.#watched[node] = 0;
    this.#watching--;
    this.#onWatchedMove();
  }

  /** Copies every node's table into a fresh pool with room for `more` words after them (left-behind regions are dropped). */
  #repack(more: number): void {
    const where = this.#where;
    let live = 0;
    for (let w = 0; w < where.length; w += 2) live += where[w + 1]! * 2;
    const pool = new Uint32Array(Math.max(1024, (live + more) * 2));
    let top = 0;
    for (let w = 0; w < where.length; w += 2) {
      const words = where[w + 1]! * 2;
      if (words === 0) continue;
      pool.set(this.#pool.subarray(where[w]!, where[w]! + words), top);
      where[w] = top;
      top += words;
    }
    this.#pool = pool;
    this.#top = top;
    // Every table moved: all marks are spent at once (one call for them all).
    if (this.#watching > 0) {
      this.#watched.fill(0);
      this.#watching = 0;
      this.#onWatchedMove();
    }
  }
}
