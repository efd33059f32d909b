/**
 * The HPACK decoder's dynamic table (RFC 7541 2.3.2, 4): newest entry first, sized by
 * name + value octets + 32 per entry, oldest entries evicted to make room. A ring of fixed
 * capacity (every entry costs at least 32, so `maxSize / 32 + 1` slots always suffice): adding,
 * evicting and looking up are O(1) (eviction amortized over the additions it undoes).
 */

/** The per-entry overhead RFC 7541 4.1 adds to name and value lengths. */
export const ENTRY_OVERHEAD = 32;

export class DynamicTable {
  private readonly names: string[];
  private readonly values: string[];
  private readonly mask: number;
  /** Slot of the newest entry. */
  private head = 0;
  private count = 0;
  private size = 0;
  private max: number;

  constructor(maxSize: number) {
    let capacity = 1;
    while (capacity < Math.floor(maxSize / ENTRY_OVERHEAD) + 1) capacity *= 2;
    this.names = new Array<string>(capacity).fill('');
    this.values = new Array<string>(capacity).fill('');
    this.mask = capacity - 1;
    this.max = maxSize;
  }

  /** Entries held now. */
  get length(): number {
    return this.count;
  }

  /** Name of entry `i` (0 = newest); the caller checks `i < length`. */
  name(i: number): string {
    return this.names[(this.head - i) & this.mask]!;
  }

  value(i: number): string {
    return this.values[(this.head - i) & this.mask]!;
  }

  add(name: string, value: string): void {
    const entry = name.length + value.length + ENTRY_OVERHEAD;
    if (entry > this.max) {
      // RFC 7541 4.4: an entry larger than the table empties it and is not added.
      this.evictTo(0);
      return;
    }
    this.evictTo(this.max - entry);
    this.head = (this.head + 1) & this.mask;
    this.names[this.head] = name;
    this.values[this.head] = value;
    this.count++;
    this.size += entry;
  }

  /** A dynamic table size update; the caller checks `max` against the limit it advertised. */
  resize(max: number): void {
    this.max = max;
    this.evictTo(max);
  }

  private evictTo(limit: number): void {
    while (this.size > limit) {
      const oldest = (this.head - this.count + 1) & this.mask;
      this.size -= this.names[oldest]!.length + this.values[oldest]!.length + ENTRY_OVERHEAD;
      this.names[oldest] = '';
      this.values[oldest] = '';
      this.count--;
    }
  }
}
