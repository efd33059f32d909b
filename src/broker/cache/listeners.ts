/**
 * A set of listeners called in turn, each guarded: a listener that throws is reported to
 * `onThrow` (the owner logs it) and the others are still called, so one faulty subscriber can
 * neither stop the caller's work (the certificate manager's queue) nor starve the subscribers
 * after it. Plain TypeScript.
 */
export type Listener<E> = (event: E) => void;

export class Listeners<E> {
  readonly #listeners = new Set<Listener<E>>();
  readonly #onThrow: (err: unknown) => void;

  constructor(onThrow: (err: unknown) => void) {
    this.#onThrow = onThrow;
  }

  get size(): number {
    return this.#listeners.size;
  }

  /** Adds `listener`; returns its removal. */
  add(listener: Listener<E>): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Calls every listener registered now (a listener added meanwhile waits for the next event). */
  emit(event: E): void {
    for (const listener of [...this.#listeners]) guard(() => listener(event), this.#onThrow);
  }

  clear(): void {
    this.#listeners.clear();
  }
}

/** Runs `fn`; a throw goes to `onThrow` instead of the caller. */
export function guard(fn: () => void, onThrow: (err: unknown) => void): void {
  try {
    fn();
  } catch (err) {
    onThrow(err);
  }
}
