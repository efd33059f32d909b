/**
 * How long a caller the CA turns away (RESOURCE_EXHAUSTED: `CA_MAX_STREAMS` calls open) should
 * wait before trying again: about the time the CA needs to answer the calls already open, from
 * the rate at which it answered calls over the last few seconds, kept between `minMs` and
 * `maxMs`. Sent as the gRPC retry pushback (`grpc-retry-pushback-ms`); the broker waits at least
 * that long and spreads it (src/broker/cache/refresh-policy.ts), so a fleet restarting at once
 * comes back about as fast as the CA drains, instead of every few seconds. Pure: a clock and
 * counts.
 */
import type { Clock } from '../core/clock.js';

export interface OverloadHintOptions {
  readonly clock: Clock;
  /** The shortest pushback (default 1 000 ms). */
  readonly minMs?: number;
  /** The longest pushback, also the one when nothing completed lately (default 30 000 ms). */
  readonly maxMs?: number;
  /** Answers counted over this many seconds back (default 5). */
  readonly windowSeconds?: number;
}

export const DEFAULT_OVERLOAD_HINT = Object.freeze({ minMs: 1_000, maxMs: 30_000, windowSeconds: 5 });

export class OverloadHint {
  readonly #clock: Clock;
  readonly #minMs: number;
  readonly #maxMs: number;
  /** Answers per whole second, a ring of `windowSeconds` buckets, each tagged with its second. */
  readonly #counts: number[];
  readonly #seconds: number[];

  constructor(options: OverloadHintOptions) {
    this.#clock = options.clock;
    this.#minMs = options.minMs ?? DEFAULT_OVERLOAD_HINT.minMs;
    this.#maxMs = options.maxMs ?? DEFAULT_OVERLOAD_HINT.maxMs;
    const n = options.windowSeconds ?? DEFAULT_OVERLOAD_HINT.windowSeconds;
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`windowSeconds must be a whole number >= 1, got ${n}`);
    if (!(this.#minMs >= 0 && this.#maxMs >= this.#minMs)) throw new RangeError(`need 0 <= minMs <= maxMs, got ${this.#minMs}, ${this.#maxMs}`);
    this.#counts = new Array<number>(n).fill(0);
    this.#seconds = new Array<number>(n).fill(-1);
  }

  /** One admitted call was answered (or ended). */
  completed(): void {
    const second = Math.floor(this.#clock.now() / 1000);
    const i = second % this.#counts.length;
    if (this.#seconds[i] !== second) {
      this.#seconds[i] = second;
      this.#counts[i] = 0;
    }
    this.#counts[i]!++;
  }

  /** Calls answered per second over the window (the current second included). */
  ratePerSecond(): number {
    const now = Math.floor(this.#clock.now() / 1000);
    let total = 0;
    for (let i = 0; i < this.#counts.length; i++) if (now - this.#seconds[i]! < this.#counts.length) total += this.#counts[i]!;
    return total / this.#counts.length;
  }

  /** The pushback for a caller turned away while `open` calls are open: their drain time, bounded. */
  retryAfterMs(open: number): number {
    const rate = this.ratePerSecond();
    const drainMs = rate > 0 ? (Math.max(0, open) / rate) * 1000 : this.#maxMs;
    return Math.round(Math.min(this.#maxMs, Math.max(this.#minMs, drainMs)));
  }
}
