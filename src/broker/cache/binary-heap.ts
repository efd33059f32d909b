/**
 * Sift steps of a binary min-heap kept in a plain array, shared by the keyed fetch queue and the
 * timer queue. `less(a, b)` orders the heap; `placed(item, i)`, when given, is told each time an
 * item moves to index `i` (the timer queue keeps each timer's index for O(log n) removal).
 * Plain TypeScript.
 */

export type Less<T> = (a: T, b: T) => boolean;
export type Placed<T> = (item: T, index: number) => void;

function swap<T>(h: T[], i: number, j: number, placed: Placed<T> | undefined): void {
  const a = h[i]!;
  const b = h[j]!;
  h[i] = b;
  h[j] = a;
  placed?.(b, i);
  placed?.(a, j);
}

/** Moves the item at `i` towards the root while it is less than its parent. */
export function siftUp<T>(h: T[], i: number, less: Less<T>, placed?: Placed<T>): void {
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!less(h[i]!, h[parent]!)) return;
    swap(h, i, parent, placed);
    i = parent;
  }
}

/** Moves the item at `i` towards the leaves while a child is less than it. */
export function siftDown<T>(h: T[], i: number, less: Less<T>, placed?: Placed<T>): void {
  for (;;) {
    const l = 2 * i + 1;
    const r = l + 1;
    let m = i;
    if (l < h.length && less(h[l]!, h[m]!)) m = l;
    if (r < h.length && less(h[r]!, h[m]!)) m = r;
    if (m === i) return;
    swap(h, i, m, placed);
    i = m;
  }
}
