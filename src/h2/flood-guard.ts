/**
 * Per-connection budgets against cheap-frame floods (RFC 9113 §10.5): frames that make the
 * server work without carrying requests (PING, SETTINGS, empty DATA, PRIORITY, WINDOW_UPDATE,
 * unknown types) and streams the client resets or we refuse (the "rapid reset" pattern). Each
 * budget allows `limit` events per window of `windowMs` on the injected clock; past it the
 * connection answers GOAWAY(ENHANCE_YOUR_CALM) and closes. No timer: the window is checked when
 * an event is charged. `RecentIds` remembers the last stream ids reset or closed.
 */
import type { Clock } from '../core/clock.js';

export class FloodGuard {
  readonly #clock: Clock;
  readonly #limit: number;
  readonly #windowMs: number;
  #windowStart: number;
  #count = 0;

  constructor(clock: Clock, limit: number, windowMs: number) {
    this.#clock = clock;
    this.#limit = limit;
    this.#windowMs = windowMs;
    this.#windowStart = clock.now();
  }

  /** Counts one event; false when the budget of the current window is spent. */
  charge(): boolean {
    if (++this.#count <= this.#limit) return true;
    const now = this.#clock.now();
    if (now - this.#windowStart >= this.#windowMs) {
      this.#windowStart = now;
      this.#count = 1;
      return true;
    }
    return false;
  }
}

/** Bounds against abuse; each has a default (see `DEFAULT_GUARDS`). */
export interface H2Guards {
  /** PING, SETTINGS, empty DATA, PRIORITY, WINDOW_UPDATE and unknown frames per second. */
  readonly controlFramesPerSecond: number;
  /** Streams reset by the client before their answer, or refused by us, per second ("rapid reset"). */
  readonly resetsPerSecond: number;
  /** Frames of one header block (HEADERS + CONTINUATIONs). */
  readonly maxBlockFrames: number;
  /** Socket output not yet taken by the peer above which we stop reading its input. */
  readonly pauseOutputBytes: number;
}

export const DEFAULT_GUARDS: H2Guards = Object.freeze({
  controlFramesPerSecond: 5000,
  resetsPerSecond: 1000,
  maxBlockFrames: 64,
  pauseOutputBytes: 1024 * 1024,
});

/** The last few stream ids of a kind (reset by us, closed), to judge frames that arrive after (§5.1, §5.4.2). */
export class RecentIds {
  readonly #ids: Int32Array;
  #at = 0;
  constructor(size: number) {
    this.#ids = new Int32Array(size);
  }
  add(id: number): void {
    this.#ids[this.#at] = id;
    this.#at = (this.#at + 1) % this.#ids.length;
  }
  has(id: number): boolean {
    return this.#ids.includes(id);
  }
}
