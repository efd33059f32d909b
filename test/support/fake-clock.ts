/**
 * A test double for `Clock`: time stands still until `advance()`. `waitForTimers(n)` resolves
 * once at least `n` sleeps are armed, so a test lets the code arm its timer before moving time
 * (no races, no real sleeps); it rejects after `timeoutMs` of real time, so a timer the code
 * never arms fails the test in seconds instead of hanging until the runner's test timeout.
 */
import type { Clock } from '../../src/core/clock.js';
import { abortReason } from '../../src/core/deadline.js';

interface PendingSleep {
  readonly due: number;
  readonly seq: number;
  readonly resolve: () => void;
}

interface TimerWaiter {
  readonly count: number;
  readonly resolve: () => void;
}

/** How long `waitForTimers` waits (real time) by default: far above any honest wait on a loaded machine. */
export const DEFAULT_WAIT_FOR_TIMERS_MS = 10_000;

export interface WaitForTimersOptions {
  /** Real milliseconds before the wait fails (default `DEFAULT_WAIT_FOR_TIMERS_MS`). */
  readonly timeoutMs?: number;
  /** Ends the wait early, rejecting with the abort reason. */
  readonly signal?: AbortSignal;
}

/** Marks `p` handled (a caller that awaits it still sees its rejection). */
function quietly<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  #pending: PendingSleep[] = [];
  #waiters: TimerWaiter[] = [];

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortReason(signal));
        return;
      }
      const entry: PendingSleep = {
        due: this.#now + Math.max(0, ms),
        seq: this.#seq++,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.#pending = this.#pending.filter((p) => p !== entry);
        reject(abortReason(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.push(entry);
      this.#notifyWaiters();
    });
  }

  /** Number of sleeps currently armed. */
  get pendingTimers(): number {
    return this.#pending.length;
  }

  /** Earliest armed deadline, or undefined. */
  get nextDue(): number | undefined {
    let min: number | undefined;
    for (const p of this.#pending) if (min === undefined || p.due < min) min = p.due;
    return min;
  }

  /**
   * Resolves when at least `count` sleeps are armed; rejects after `timeoutMs` of real time with
   * "waited N ms for K armed timers, have M". Its timer keeps the process alive, so the failure
   * always carries that message. `signal` ends the wait early (a waiter raced against the code's
   * own outcome: abort it when the outcome wins); a waiter that ends unawaited is not an
   * unhandled rejection, only a caller that awaits it sees the error.
   */
  waitForTimers(count = 1, options: WaitForTimersOptions = {}): Promise<void> {
    const { timeoutMs = DEFAULT_WAIT_FOR_TIMERS_MS, signal } = options;
    if (this.#pending.length >= count) return Promise.resolve();
    if (signal?.aborted) return quietly(Promise.reject(abortReason(signal)));
    return quietly(
      new Promise<void>((resolve, reject) => {
        const settle = (err?: Error) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          this.#waiters = this.#waiters.filter((w) => w !== waiter);
          if (err) reject(err);
          else resolve();
        };
        const onAbort = () => settle(abortReason(signal!));
        const timer = setTimeout(
          () => settle(new Error(`waited ${timeoutMs} ms for ${count} armed timers, have ${this.#pending.length}`)),
          timeoutMs,
        );
        const waiter: TimerWaiter = { count, resolve: () => settle() };
        signal?.addEventListener('abort', onAbort, { once: true });
        this.#waiters.push(waiter);
      }),
    );
  }

  /**
   * Moves time forward by `ms`, firing every due sleep in deadline order and letting the
   * microtasks each one schedules run before the next fires.
   */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      const due = this.#pending
        .filter((p) => p.due <= target)
        .sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!due) break;
      this.#pending = this.#pending.filter((p) => p !== due);
      this.#now = Math.max(this.#now, due.due);
      due.resolve();
      await flushMicrotasks();
    }
    this.#now = target;
    await flushMicrotasks();
  }

  /** Sets the wall time without firing anything (for "the token already expired" cases). */
  set(ms: number): void {
    this.#now = ms;
  }

  #notifyWaiters(): void {
    const ready = this.#waiters.filter((w) => this.#pending.length >= w.count);
    this.#waiters = this.#waiters.filter((w) => this.#pending.length < w.count);
    for (const w of ready) w.resolve();
  }
}

/** Lets queued promise continuations run (several turns, enough for chained awaits). */
export async function flushMicrotasks(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await Promise.resolve();
}
