/**
 * How a CreateCertificate handler hears that its call ended before the answer (the client reset
 * the stream, went away, or its deadline passed). A handler mostly asks only "is it over?"; an
 * AbortSignal is needed only to stop work elsewhere (a signer or forward that calls out), and
 * making one costs ~3 µs with its garbage — a few percent of the CA's main thread per call. So
 * the HTTP/2 transports pass a `CallAbort`, whose `aborted` is a field and whose AbortSignal is
 * made on first `signal()`; callers that already hold an AbortSignal (grpc-js, tests, benches)
 * pass that. `abortSignalOf` gives the AbortSignal of either.
 */

export interface CallAbort {
  /** The call ended before its answer. */
  readonly aborted: boolean;
  /** An AbortSignal that aborts when the call does (already aborted if it has): made on first use. */
  signal(): AbortSignal;
}

export type CallSignal = AbortSignal | CallAbort;

/** The AbortSignal of `s`. */
export function abortSignalOf(s: CallSignal): AbortSignal {
  return 'signal' in s ? s.signal() : s;
}

/** A CallAbort the transport ends with `abort()`; its AbortSignal exists only if someone asked for it. */
export class LazyCallAbort implements CallAbort {
  #aborted = false;
  #controller: AbortController | undefined;

  get aborted(): boolean {
    return this.#aborted;
  }

  signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort();
    }
    return this.#controller.signal;
  }

  abort(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#controller?.abort();
  }
}
