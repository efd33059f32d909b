/**
 * A set of listeners called in turn, each guarded: a listener that throws is reported to the
 * emitter's `onThrow` (the owner logs it) and the others are still called, so one faulty
 * subscriber can neither stop the caller's work (the certificate manager's queue, a signer's readiness change) nor starve the
 * subscribers after it. The handler comes with each `emit`, so a set costs no closure of its own
 * (the manager keeps one per identity). Plain TypeScript.
 */
export type Listener<E> = (event: E) => void;

export class Listeners<E> {
  readonly #listeners = new Set<Listener<E>>();

  get size(): number {
    return this.#listeners.size;
  }

  /** Adds `listener`; returns its removal. */
  add(listener: Listener<E>): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Calls every listener registered now (a listener added meanwhile waits for the next event). */
  emit(event: E, onThrow: (err: unknown) => void): void {
    emitGuarded(this.#listeners, event, onThrow);
  }

  clear(): void {
    this.#listeners.clear();
  }
}

/** Calls each of `listeners` (as they are now) with `event`, guarded. */
export function emitGuarded<E>(listeners: Iterable<Listener<E>>, event: E, onThrow: (err: unknown) => void): void {
  for (const listener of [...listeners]) guard(() => listener(event), onThrow);
}

/** Runs `fn`; a throw goes to `onThrow` instead of the caller. */
export function guard(fn: () => void, onThrow: (err: unknown) => void): void {
  try {
    fn();
  } catch (err) {
    onThrow(err);
  }
}
