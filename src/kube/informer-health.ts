/**
 * The informer's health: `problem()`, the readiness answer (not listed yet, or stale: nothing
 * heard for STALE_AFTER_IDLE_WINDOWS watchdog windows); when the informer last heard from the API server (a complete list, an event or a bookmark),
 * and the listeners told when its `problem()` turns: the first complete list, nothing heard for
 * the stale window (timed on the injected clock, armed only while someone listens), hearing
 * from the API server again. A throwing listener is logged and never stops the informer.
 */
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { STALE_AFTER_IDLE_WINDOWS } from './informer-settings.js';

export interface InformerHealthOptions {
  readonly clock: Clock;
  readonly idleMs: number;
  /** The name in messages. */
  readonly resource: string;
  /** What `problem()` reads from the informer. */
  readonly state: () => { readonly synced: boolean; readonly lastError: string | undefined; readonly watchdogRestarts: number };
  /** The informer's stop signal: the staleness loop ends with it. */
  readonly stop: AbortSignal;
  readonly logger: Logger;
}

/** Milliseconds as seconds with one decimal, for messages and logs. */
export function seconds(ms: number): number {
  return Math.round(ms / 100) / 10;
}

export class InformerHealth {
  readonly #o: InformerHealthOptions;
  readonly #listeners = new Set<(problem: string | undefined) => void>();
  #lastHeardAt: number;
  /** Whether the listeners were last told "healthy" (undefined: told nothing yet). */
  #toldHealthy: boolean | undefined;
  /** The staleness timer's loop, while there are listeners and the informer runs. */
  #staleLoop: Promise<void> | undefined;
  /** Wakes the staleness loop when the informer hears from the API server again. */
  #wakeOnHeard: (() => void) | undefined;

  constructor(options: InformerHealthOptions) {
    this.#o = options;
    this.#lastHeardAt = options.clock.now();
  }

  get lastHeardAt(): number {
    return this.#lastHeardAt;
  }

  /** Milliseconds since the informer last heard from the API server (since start before that). */
  lastEventAgeMs(): number {
    return Math.max(0, this.#o.clock.now() - this.#lastHeardAt);
  }

  /** Undefined while healthy; otherwise why the cache cannot be trusted (for readiness). */
  problem(): string | undefined {
    const { synced, lastError, watchdogRestarts } = this.#o.state();
    const { resource, idleMs } = this.#o;
    const last = lastError === undefined ? '' : `; last error: ${lastError}`;
    if (!synced) return `${resource} not listed yet${last}`;
    const age = this.lastEventAgeMs();
    if (age > STALE_AFTER_IDLE_WINDOWS * idleMs) {
      return `${resource} watch stale: no list, event or bookmark for ${seconds(age)} s (watchdog ${seconds(idleMs)} s, ${watchdogRestarts} watchdog restarts)${last}`;
    }
    return undefined;
  }

  /** Counts the stale window from now (the informer starts), without telling anyone. */
  restartWindow(): void {
    this.#lastHeardAt = this.#o.clock.now();
  }

  /** Adds a listener; `running`: the informer runs, so the staleness timer starts now. Returns an unsubscribe. */
  subscribe(listener: (problem: string | undefined) => void, running: boolean): () => void {
    this.#listeners.add(listener);
    if (running) this.startTimer();
    return () => this.#listeners.delete(listener);
  }

  /** Starts the staleness timer when someone listens (the informer started). */
  startTimer(): void {
    if (this.#listeners.size === 0) return;
    this.#staleLoop ??= this.#watchStaleness()
      .catch((err: unknown) => this.#o.logger.error('informer staleness timer failed', { err: describeError(err) }))
      .finally(() => (this.#staleLoop = undefined));
  }

  /** A complete list, an event or a bookmark arrived at `atMs`: tell whoever waits for it. */
  heard(atMs: number): void {
    this.#lastHeardAt = atMs;
    this.wake();
    if (this.#toldHealthy !== true && this.#listeners.size > 0) this.#tell();
  }

  /** Wakes the staleness loop (on hearing again, or on stop so it can end). */
  wake(): void {
    const wake = this.#wakeOnHeard;
    this.#wakeOnHeard = undefined;
    wake?.();
  }

  #tell(): void {
    const problem = this.problem();
    const healthy = problem === undefined;
    if (healthy === this.#toldHealthy) return;
    this.#toldHealthy = healthy;
    for (const l of this.#listeners) {
      try {
        l(problem);
      } catch (err) {
        this.#o.logger.error('informer health listener threw', { err: describeError(err) });
      }
    }
  }

  /** Sleeps until the stale window would end, tells the listeners when it did, then waits to hear again. */
  async #watchStaleness(): Promise<void> {
    const windowMs = STALE_AFTER_IDLE_WINDOWS * this.#o.idleMs;
    while (!this.#o.stop.aborted && this.#listeners.size > 0) {
      const wait = this.#lastHeardAt + windowMs - this.#o.clock.now();
      if (wait >= 0) {
        try {
          await this.#o.clock.sleep(wait + 1, this.#o.stop);
        } catch {
          return;
        }
        continue;
      }
      this.#tell();
      await new Promise<void>((resolve) => (this.#wakeOnHeard = resolve));
    }
  }
}
