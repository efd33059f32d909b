/** `Secret`: a token or private key wrapped so that no log line, error message or JSON dump can print it. */
import { inspect } from 'node:util';

const REDACTED = '[redacted]';

/**
 * A value that must never reach a log, an error message or a JSON dump: tokens, private keys.
 * `String(secret)`, `JSON.stringify(secret)` and `util.inspect(secret)` all print `[redacted]`;
 * only `reveal()` gives the value, and each call site that reveals is a place to review.
 */
export class Secret<T = string> {
  readonly #value: T;

  constructor(value: T) {
    this.#value = value;
  }

  reveal(): T {
    return this.#value;
  }

  toString(): string {
    return REDACTED;
  }

  toJSON(): string {
    return REDACTED;
  }

  [inspect.custom](): string {
    return REDACTED;
  }
}
