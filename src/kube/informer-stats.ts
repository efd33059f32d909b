/** What an informer counts: lists, pages, watches and its restarts by reason (for metrics and tests). */

/** Why a watch was re-opened: the `reason` label of `certbroker_informer_restarts_total`. */
export type RestartReason = 'watchdog' | '410' | 'error' | 'throttled' | 'timeout';
export const RESTART_REASONS: readonly RestartReason[] = ['watchdog', '410', 'error', 'throttled', 'timeout'];

export interface InformerStats {
  /** Complete lists. */
  readonly lists: number;
  /** List pages requested (successful ones). */
  readonly pages: number;
  /** Watch requests sent. */
  readonly watches: number;
  readonly consecutiveFailures: number;
  readonly restarts: Readonly<Record<RestartReason, number>>;
}

/** Restarts by reason, with listeners called on each one (a throwing listener is ignored). */
export class RestartCounts {
  readonly #counts: Record<RestartReason, number> = { watchdog: 0, '410': 0, error: 0, throttled: 0, timeout: 0 };
  readonly #listeners = new Set<(reason: RestartReason) => void>();

  get counts(): Readonly<Record<RestartReason, number>> {
    return { ...this.#counts };
  }

  /** Calls `listener` on every restart with its reason. Returns an unsubscribe. */
  subscribe(listener: (reason: RestartReason) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  record(reason: RestartReason): void {
    this.#counts[reason]++;
    for (const l of this.#listeners) {
      try {
        l(reason);
      } catch {
        // a metrics listener never stops the informer
      }
    }
  }
}
