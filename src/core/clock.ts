/**
 * Time as a parameter. Production code takes a `Clock`; tests pass a `FakeClock` that only
 * moves when told to and can wait until the code under test has armed a timer.
 */

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Resolves after `ms`, or rejects with an AbortError when `signal` aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const err = new Error('aborted');
  err.name = 'AbortError';
  return err;
}

/** setTimeout's largest delay; a longer one fires after 1 ms instead (TimeoutOverflowWarning). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep(ms, signal) {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError(signal));
        return;
      }
      // Delays past ~24.8 days (a 90-day certificate's expiry) sleep in steps.
      const due = Date.now() + Math.max(0, ms);
      let timer: NodeJS.Timeout;
      const onAbort = () => {
        clearTimeout(timer);
        reject(abortError(signal!));
      };
      const arm = (delay: number) => {
        timer = setTimeout(() => {
          const left = due - Date.now();
          if (left > 0 && delay === MAX_TIMEOUT_MS) {
            arm(Math.min(left, MAX_TIMEOUT_MS));
            return;
          }
          signal?.removeEventListener('abort', onAbort);
          resolve();
        }, delay);
        timer.unref();
      };
      arm(Math.min(Math.max(0, ms), MAX_TIMEOUT_MS));
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  },
};

interface PendingSleep {
  readonly due: number;
  readonly seq: number;
  readonly resolve: () => void;
}

/**
 * A clock that stands still until `advance()`. `waitForTimers(n)` resolves once at least `n`
 * sleeps are pending, so a test can let the code arm its timer before moving time — no races,
 * no real sleeps.
 */
export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  #pending: PendingSleep[] = [];
  #waiters: Array<{ count: number; resolve: () => void }> = [];

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(abortError(signal));
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
        reject(abortError(signal!));
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

  /** Resolves when at least `count` sleeps are armed. */
  waitForTimers(count = 1): Promise<void> {
    if (this.#pending.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
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
