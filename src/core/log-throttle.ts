/**
 * Rate-limited logging for events a remote party can cause at any rate (connection and stream
 * errors): per key, at most one line every `intervalMs`; the lines held back meanwhile are
 * counted and reported as `suppressed` on the next line of that key. Time comes from the
 * injected clock's `now()`; no timer is armed.
 */
import type { Clock } from './clock.js';
import type { LogFields, Logger } from './log.js';

export interface LogThrottleOptions {
  readonly logger: Logger;
  readonly clock: Pick<Clock, 'now'>;
  /** Shortest time between two lines of one key. */
  readonly intervalMs: number;
  /** Keys remembered at most (a flood of distinct keys cannot grow it further; the oldest go first). */
  readonly maxKeys?: number;
}

interface KeyState {
  lastAt: number;
  suppressed: number;
}

export class LogThrottle {
  readonly #o: LogThrottleOptions;
  readonly #keys = new Map<string, KeyState>();

  constructor(options: LogThrottleOptions) {
    this.#o = options;
  }

  /** Logs `msg` at `level` unless a line of `key` was written less than `intervalMs` ago. */
  log(level: 'debug' | 'info' | 'warn' | 'error', key: string, msg: string, fields: LogFields = {}): void {
    const logger = this.#o.logger;
    // Nothing to count at a level that is not written.
    if (level === 'debug' && logger.level !== 'debug') return;
    const now = this.#o.clock.now();
    const state = this.#keys.get(key);
    if (state && now - state.lastAt < this.#o.intervalMs) {
      state.suppressed++;
      return;
    }
    const suppressed = state?.suppressed ?? 0;
    this.#keys.delete(key);
    this.#keys.set(key, { lastAt: now, suppressed: 0 });
    if (this.#keys.size > (this.#o.maxKeys ?? 256)) this.#keys.delete(this.#keys.keys().next().value!);
    logger[level](msg, suppressed > 0 ? { ...fields, suppressed } : fields);
  }
}
