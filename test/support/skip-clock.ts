/**
 * Real time that a test can skip forward: `now()` is the wall clock plus an offset, sleeps fire
 * on real timers or when `skip(ms)` moves the offset past their deadline. Lets end-to-end tests
 * reach a certificate's half-life without waiting for it, while sockets, TLS and the CA run on
 * real time (the skip stays far below the certificates' lifetimes).
 */
import type { Clock } from '../../src/core/clock.js';

const MAX_TIMER_MS = 2 ** 31 - 1;

interface Sleeper {
  readonly due: number;
  readonly fire: () => void;
}

export class SkipClock implements Clock {
  #offset = 0;
  readonly #sleepers = new Set<Sleeper>();

  now(): number {
    return Date.now() + this.#offset;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const sleeper: Sleeper = {
        due: this.now() + Math.max(0, ms),
        fire: () => {
          clearTimeout(timer);
          this.#sleepers.delete(sleeper);
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        clearTimeout(timer);
        this.#sleepers.delete(sleeper);
        reject(signal!.reason);
      };
      // A real timer holds at most MAX_TIMER_MS (beyond it Node fires after 1 ms): longer sleeps
      // (a 30-day certificate's notAfter) re-arm until due.
      let timer: NodeJS.Timeout;
      const arm = (delay: number) => {
        timer = setTimeout(() => {
          const left = sleeper.due - this.now();
          if (left > 0) arm(left);
          else sleeper.fire();
        }, Math.min(Math.max(0, delay), MAX_TIMER_MS));
        timer.unref();
      };
      arm(ms);
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#sleepers.add(sleeper);
    });
  }

  /** Moves time forward by `ms`, firing every sleep that is now due. */
  skip(ms: number): void {
    this.#offset += ms;
    const now = this.now();
    for (const s of [...this.#sleepers]) if (s.due <= now) s.fire();
  }
}
