/**
 * How many active pods (not Succeeded or Failed) each (node, namespace, service account) has,
 * as ids (compact-pod-index.ts interns the strings). The node authorizer's per-call question,
 * "does this account have an active pod on the caller's node", is one probe here: an
 * open-addressing table with linear probing in one Uint32Array, 16 bytes per entry
 * (node + 1, namespace, account, count; node 0 = empty), so an answer reads one or two cache lines
 * however large the cluster. An entry whose count drops to zero is deleted by shifting the
 * probe run back (no tombstones), so churn does not fill the table.
 */

const STRIDE = 4;
const MIN_CAPACITY = 1024;
/** Grow when more than this share of entries is in use. */
const MAX_LOAD = 0.7;

function hash(node: number, ns: number, sa: number): number {
  let h = Math.imul(node + 1, 0x9e3779b1) ^ Math.imul(ns + 0x632be5ab, 0x85ebca77) ^ Math.imul(sa + 0x2545f491, 0xc2b2ae3d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x2c1b3c6d);
  h ^= h >>> 12;
  return h >>> 0;
}

export class NodeAccountCounts {
  #table = new Uint32Array(MIN_CAPACITY * STRIDE);
  #mask = MIN_CAPACITY - 1;
  #used = 0;

  /** Distinct (node, namespace, account) triples with at least one active pod. */
  get size(): number {
    return this.#used;
  }

  /** Active pods of (node, ns, sa). */
  count(node: number, ns: number, sa: number): number {
    const i = this.#find(node, ns, sa);
    return i < 0 ? 0 : this.#table[i * STRIDE + 3]!;
  }

  add(node: number, ns: number, sa: number): void {
    const found = this.#find(node, ns, sa);
    if (found >= 0) {
      this.#table[found * STRIDE + 3]!++;
      return;
    }
    if ((this.#used + 1) > (this.#mask + 1) * MAX_LOAD) this.#grow();
    const t = this.#table;
    let i = hash(node, ns, sa) & this.#mask;
    while (t[i * STRIDE] !== 0) i = (i + 1) & this.#mask;
    t[i * STRIDE] = node + 1;
    t[i * STRIDE + 1] = ns;
    t[i * STRIDE + 2] = sa;
    t[i * STRIDE + 3] = 1;
    this.#used++;
  }

  /** One active pod fewer; the entry goes when none is left. */
  remove(node: number, ns: number, sa: number): void {
    const i = this.#find(node, ns, sa);
    if (i < 0) return;
    const t = this.#table;
    if (--t[i * STRIDE + 3]! > 0) return;
    this.#delete(i);
    this.#used--;
  }

  /** Entry index of the triple, or -1. */
  #find(node: number, ns: number, sa: number): number {
    const t = this.#table;
    const tag = node + 1;
    for (let i = hash(node, ns, sa) & this.#mask; ; i = (i + 1) & this.#mask) {
      const o = i * STRIDE;
      const n = t[o]!;
      if (n === 0) return -1;
      if (n === tag && t[o + 1] === ns && t[o + 2] === sa) return i;
    }
  }

  /** Empties entry `hole`, moving later entries of its probe run back so every entry stays reachable from its home. */
  #delete(hole: number): void {
    const t = this.#table;
    const mask = this.#mask;
    let i = hole;
    for (let j = (i + 1) & mask; t[j * STRIDE] !== 0; j = (j + 1) & mask) {
      const o = j * STRIDE;
      const home = hash(t[o]! - 1, t[o + 1]!, t[o + 2]!) & mask;
      // The entry at j may stay when its home lies cyclically in (i, j].
      const stays = i <= j ? home > i && home <= j : home > i || home <= j;
      if (stays) continue;
      t.copyWithin(i * STRIDE, o, o + STRIDE);
      i = j;
    }
    t.fill(0, i * STRIDE, i * STRIDE + STRIDE);
  }

  #grow(): void {
    const old = this.#table;
    const capacity = (this.#mask + 1) * 2;
    this.#table = new Uint32Array(capacity * STRIDE);
    this.#mask = capacity - 1;
    for (let o = 0; o < old.length; o += STRIDE) {
      if (old[o] === 0) continue;
      let i = hash(old[o]! - 1, old[o + 1]!, old[o + 2]!) & this.#mask;
      while (this.#table[i * STRIDE] !== 0) i = (i + 1) & this.#mask;
      this.#table.set(old.subarray(o, o + STRIDE), i * STRIDE);
    }
  }
}
