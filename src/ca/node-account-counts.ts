/**
 * How many active pods (not Succeeded or Failed) each account has on each node, as ids
 * (compact-pod-index.ts interns nodes and (namespace, service account) pairs). The node
 * authorizer's per-call question, "does this account have an active pod on the caller's node",
 * is one probe of **that node's own** table: an open-addressing table with linear probing in a
 * small Uint32Array (8 bytes per entry: account + 1, count; 0 = empty). A node runs some tens of
 * accounts, so its table is a few cache lines, and a node agent asking for the identities of its
 * node's pods one after another reads the same lines each time however large the cluster (one
 * table for the whole cluster put every (node, account) on a line of its own, a miss per call).
 * An entry whose count drops to zero is deleted by shifting the probe run back (no tombstones),
 * so churn does not fill a table.
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

/** Entry index of `account` in `t` (entries of 2 words), or -1. */
function find(t: Uint32Array, account: number): number {
  const mask = (t.length >>> 1) - 1;
  const tag = account + 1;
  for (let i = hash(account) & mask; ; i = (i + 1) & mask) {
    const k = t[i << 1]!;
    if (k === tag) return i;
    if (k === 0) return -1;
  }
}

function insert(t: Uint32Array, tag: number, count: number): void {
  const mask = (t.length >>> 1) - 1;
  let i = hash(tag - 1) & mask;
  while (t[i << 1] !== 0) i = (i + 1) & mask;
  t[i << 1] = tag;
  t[(i << 1) + 1] = count;
}

/** Empties entry `hole` of `t`, moving later entries of its probe run back so every entry stays reachable from its home. */
function deleteEntry(t: Uint32Array, hole: number): void {
  const mask = (t.length >>> 1) - 1;
  let i = hole;
  for (let j = (i + 1) & mask; t[j << 1] !== 0; j = (j + 1) & mask) {
    const home = hash(t[j << 1]! - 1) & mask;
    // The entry at j may stay when its home lies cyclically in (i, j].
    const stays = i <= j ? home > i && home <= j : home > i || home <= j;
    if (stays) continue;
    t[i << 1] = t[j << 1]!;
    t[(i << 1) + 1] = t[(j << 1) + 1]!;
    i = j;
  }
  t[i << 1] = 0;
  t[(i << 1) + 1] = 0;
}

export class NodeAccountCounts {
  /** Per node id: its table (undefined until it has an active pod). */
  readonly #tables: Array<Uint32Array | undefined> = [];
  /** Per node id: entries in use. */
  readonly #used: number[] = [];
  #size = 0;

  /** Distinct (node, account) pairs with at least one active pod. */
  get size(): number {
    return this.#size;
  }

  /** Active pods of `account` on `node`. */
  count(node: number, account: number): number {
    const t = this.#tables[node];
    if (t === undefined) return 0;
    const i = find(t, account);
    return i < 0 ? 0 : t[(i << 1) + 1]!;
  }

  add(node: number, account: number): void {
    let t = this.#tables[node];
    if (t === undefined) {
      t = new Uint32Array(MIN_ENTRIES * 2);
      this.#tables[node] = t;
      while (this.#used.length <= node) this.#used.push(0);
    }
    const found = find(t, account);
    if (found >= 0) {
      t[(found << 1) + 1]!++;
      return;
    }
    const used = this.#used[node]! + 1;
    if (used > (t.length >>> 1) * MAX_LOAD) t = this.#grow(node, t);
    insert(t, account + 1, 1);
    this.#used[node] = used;
    this.#size++;
  }

  /** One active pod fewer; the entry goes when none is left. */
  remove(node: number, account: number): void {
    const t = this.#tables[node];
    if (t === undefined) return;
    const i = find(t, account);
    if (i < 0) return;
    if (--t[(i << 1) + 1]! > 0) return;
    deleteEntry(t, i);
    this.#used[node]!--;
    this.#size--;
  }

  #grow(node: number, old: Uint32Array): Uint32Array {
    const t = new Uint32Array(old.length * 2);
    for (let o = 0; o < old.length; o += 2) if (old[o] !== 0) insert(t, old[o]!, old[o + 1]!);
    this.#tables[node] = t;
    return t;
  }
}
