/**
 * A one-shot timer on the injected `Clock`: armed again, it replaces the previous arming;
 * cancelled, nothing fires. The certificate manager keeps one per purpose and entry (refresh or
 * retry, expiry, forget grace) instead of juggling AbortControllers. Plain TypeScript.
 */
import type { Clock } from '../../core/clock.js';

/** A Clock's sleep rejects only when cancelled: nothing to do (one function for every timer). */
const cancelled = (): void => undefined;

export class ClockTimer {
  readonly #clock: Clock;
  #armed: AbortController | undefined;
  #due: number | undefined;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  get armed(): boolean {
    return this.#armed !== undefined;
  }

  /** When the armed timer fires (ms since epoch), undefined when none is armed. */
  get due(): number | undefined {
    return this.#due;
  }

  /** Runs `fire` after `delayMs` (negative = 0) unless cancelled or armed again first. */
  arm(delayMs: number, fire: () => void): void {
    this.cancel();
    const armed = new AbortController();
    const delay = Math.max(0, delayMs);
    this.#armed = armed;
    this.#due = this.#clock.now() + delay;
    this.#clock.sleep(delay, armed.signal).then(
      () => {
        if (this.#armed !== armed) return;
        this.#armed = undefined;
        this.#due = undefined;
        fire();
      },
      cancelled,
    );
  }

  cancel(): void {
    this.#armed?.abort();
    this.#armed = undefined;
    this.#due = undefined;
  }
}
