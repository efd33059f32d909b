/**
 * Time as a parameter. Production code takes a `Clock` (`systemClock` by default); tests pass
 * the `FakeClock` or `SkipClock` of test/support/, which only move when told to.
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
