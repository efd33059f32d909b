/**
 * Callers waiting for a value that is not there yet (a certificate, a token): each `wait` is a
 * promise settled by the next `resolveAll`/`rejectAll`, or rejected with the signal's reason
 * (and forgotten) when its signal aborts first. Plain TypeScript.
 */
interface Waiter<T> {
  readonly resolve: (value: T) => void;
  readonly reject: (err: unknown) => void;
}

export class Waiters<T> {
  readonly #waiting = new Set<Waiter<T>>();

  /** Callers currently waiting. */
  get size(): number {
    return this.#waiting.size;
  }

  wait(signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        this.#waiting.delete(waiter);
        reject(signal!.reason);
      };
      const waiter: Waiter<T> = {
        resolve: (value) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.add(waiter);
    });
  }

  resolveAll(value: T): void {
    for (const w of this.#take()) w.resolve(value);
  }

  rejectAll(err: unknown): void {
    for (const w of this.#take()) w.reject(err);
  }

  #take(): Waiter<T>[] {
    const all = [...this.#waiting];
    this.#waiting.clear();
    return all;
  }
}
