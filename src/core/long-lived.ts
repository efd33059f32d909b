/**
 * The one lifecycle shape of every long-lived part (the informer, the install-cni daemon, the
 * repair controller, the ops endpoint, the devcluster; the CA and the node broker through their
 * start functions):
 *
 * - **It starts with an AbortSignal.** Aborting the signal stops the part as `stop()` does. A part
 *   that is built first and started later is a `LongLived`: `start(signal?)` resolves once it is
 *   running (which is not the same as synced or ready: those have their own waits). A part that a
 *   start function builds and starts in one step (`startX(options)` with `options.signal`, or
 *   `startX(config, { signal })`) resolves to a `Stoppable` handle.
 * - **It stops with a deadline.** `stop(deadlineMs?)` begins the stop at once and resolves when the
 *   part has stopped or when `deadlineMs` of real time have passed, whichever comes first; what is
 *   still open then is the process's to end (see src/ops/lifecycle.ts, the logged hard exit).
 *   `stop` may be called more than once, also before `start`, and never rejects. Each part
 *   documents its default deadline.
 *
 * The deadline runs on real time, not on an injected Clock: it bounds how long a shutdown may
 * take on the machine, and a FakeClock that nobody advances must not hold a test's stop forever.
 */

/** A running part that can be told to stop, with a deadline. */
export interface Stoppable {
  /** Stops the part; resolves when it stopped, or after `deadlineMs` (real time) at the latest. Never rejects. */
  stop(deadlineMs?: number): Promise<void>;
}

/** A part built first and started later: `start(signal)`, and `stop(deadlineMs)` or an abort of `signal`. */
export interface LongLived extends Stoppable {
  /** Starts the part (idempotent); aborting `signal` stops it as `stop()` does. Resolves once it runs. */
  start(signal?: AbortSignal): Promise<void>;
}

/**
 * Resolves `true` once `work` settled (resolved or rejected: a stop never rejects), or `false`
 * when `deadlineMs` passed first. The deadline's timer keeps the process alive while the stop is
 * awaited (a stop that is waited for is work in progress) and is cleared as soon as `work` settles.
 */
export async function settleWithin(work: Promise<unknown>, deadlineMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, deadlineMs));
  });
  try {
    return await Promise.race([work.then(() => true, () => true), deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Calls `stop` once, synchronously, when `signal` aborts (at once when it already has); returns
 * the function that removes the listener (call it when the part stopped some other way). A throw
 * or rejection of `stop` is dropped: the part reports its own failures.
 */
export function stopOnAbort(signal: AbortSignal | undefined, stop: () => Promise<unknown> | void): () => void {
  if (signal === undefined) return () => undefined;
  const onAbort = () => {
    try {
      void Promise.resolve(stop()).catch(() => undefined);
    } catch {
      // dropped, as a rejection is
    }
  };
  if (signal.aborted) {
    onAbort();
    return () => undefined;
  }
  signal.addEventListener('abort', onAbort, { once: true });
  return () => signal.removeEventListener('abort', onAbort);
}
