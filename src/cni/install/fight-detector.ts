/**
 * Notices when install-cni is fighting another writer: the same object put back `threshold`
 * times within `windowMs`. Pure over an injected clock reading.
 */
export interface FightDetectorOptions {
  readonly windowMs: number;
  readonly threshold: number;
  readonly now: () => number;
}

export class FightDetector {
  readonly #o: FightDetectorOptions;
  readonly #repairs = new Map<string, number[]>();

  constructor(options: FightDetectorOptions) {
    this.#o = options;
  }

  /** Records one repair of `object`; returns how many fell in the window when that reaches the threshold. */
  record(object: string): number | undefined {
    const now = this.#o.now();
    const recent = (this.#repairs.get(object) ?? []).filter((t) => now - t < this.#o.windowMs);
    recent.push(now);
    this.#repairs.set(object, recent);
    return recent.length >= this.#o.threshold ? recent.length : undefined;
  }
}
