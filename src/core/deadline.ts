/**
 * Deadlines as abort signals: `deadline(ms, { what, parent, clock })` aborts when `ms` have
 * passed on `clock` (reason: `DeadlineError`, ERR_DEADLINE_EXCEEDED, naming `what` and the
 * limit) or when `parent` aborts first (reason: the parent's). Every outbound call takes such a
 * signal and gives up, closing its connection, when it fires.
 *
 * Not `AbortSignal.timeout()`/`AbortSignal.any()`: Node 20 holds the timeout inside `any()` only
 * weakly (nodejs/node#57736), and neither runs on an injected clock. `dispose()` clears the timer
 * and the parent listener; call it once the guarded work is over.
 */
import { systemClock, type Clock } from './clock.js';
import { CertbrokerError } from './errors.js';

export class DeadlineError extends CertbrokerError<'ERR_DEADLINE_EXCEEDED'> {
  /** The limit that was exceeded. */
  readonly limitMs: number;

  constructor(what: string, limitMs: number) {
    super('ERR_DEADLINE_EXCEEDED', `${what}: no answer within ${Math.round(limitMs)} ms`, { status: 'deadline-exceeded' });
    this.limitMs = limitMs;
  }
}

export function isDeadlineError(err: unknown): err is DeadlineError {
  return err instanceof DeadlineError;
}

export interface Deadline {
  readonly signal: AbortSignal;
  /** When the deadline falls (ms since epoch on the deadline's clock). */
  readonly at: number;
  /** Milliseconds left (0 once passed). */
  remainingMs(): number;
  dispose(): void;
}

export interface DeadlineOptions {
  /** What is being waited for, for the error ("GET /api/v1/pods/x", "TokenRequest"). */
  readonly what: string;
  readonly parent?: AbortSignal | undefined;
  /** A second parent (e.g. the caller's call: it gave up); aborts with its reason too. */
  readonly caller?: AbortSignal | undefined;
  readonly clock?: Clock;
}

/**
 * One signal aborted when either `a` or `b` (optional) aborts, with that one's reason; `dispose()`
 * removes the listeners. Without `b` it is `a` itself.
 */
export function eitherSignal(a: AbortSignal, b: AbortSignal | undefined): { readonly signal: AbortSignal; dispose(): void } {
  if (!b) return { signal: a, dispose: () => undefined };
  const controller = new AbortController();
  const onA = () => controller.abort(a.reason);
  const onB = () => controller.abort(b.reason);
  const dispose = () => {
    a.removeEventListener('abort', onA);
    b.removeEventListener('abort', onB);
  };
  if (a.aborted) onA();
  else if (b.aborted) onB();
  else {
    a.addEventListener('abort', onA, { once: true });
    b.addEventListener('abort', onB, { once: true });
  }
  return { signal: controller.signal, dispose };
}

export function deadline(ms: number, options: DeadlineOptions): Deadline {
  const clock = options.clock ?? systemClock;
  const controller = new AbortController();
  const timer = new AbortController();
  const at = clock.now() + Math.max(0, ms);
  // Both parents: one signal of the two (disposed with the deadline); otherwise whichever was given.
  const joined = options.parent && options.caller ? eitherSignal(options.parent, options.caller) : undefined;
  const parent = joined?.signal ?? options.parent ?? options.caller;
  const onParent = () => {
    timer.abort();
    controller.abort(parent!.reason);
  };
  if (parent?.aborted) onParent();
  else {
    parent?.addEventListener('abort', onParent, { once: true });
    clock.sleep(Math.max(0, ms), timer.signal).then(
      () => {
        parent?.removeEventListener('abort', onParent);
        controller.abort(new DeadlineError(options.what, ms));
      },
      () => undefined,
    );
  }
  return {
    signal: controller.signal,
    at,
    remainingMs: () => (controller.signal.aborted ? 0 : Math.max(0, at - clock.now())),
    dispose() {
      timer.abort();
      parent?.removeEventListener('abort', onParent);
      joined?.dispose();
    },
  };
}

/** Runs `work` with a deadline signal and disposes of the deadline when it settles. */
export async function withDeadline<T>(ms: number, options: DeadlineOptions, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const d = deadline(ms, options);
  try {
    return await work(d.signal);
  } finally {
    d.dispose();
  }
}

/** The reason an aborted signal carries, as an Error (an AbortError when it carries none). */
export function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r;
  const err = new Error(typeof r === 'string' ? r : 'aborted');
  err.name = 'AbortError';
  return err;
}
