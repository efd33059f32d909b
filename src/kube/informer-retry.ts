/**
 * How the informer retries: jittered exponential backoff over consecutive failures, at least as
 * long as a `Retry-After` the server sent (429, 503); a 410 Gone is not a failure but a re-list.
 */
import { jitter, type Rng } from '../core/rng.js';
import { KubeApiError } from './errors.js';
import { INFORMER_DEFAULTS, type InformerSettings } from './informer-settings.js';

export function isGone(err: unknown): boolean {
  return err instanceof KubeApiError && err.httpStatus === 410;
}

/** The wait after `failures` failures in a row (the first waits `initialBackoffMs`), ±20 %. */
export function backoffMs(failures: number, settings: Pick<InformerSettings, 'initialBackoffMs' | 'maxBackoffMs'>, rng: Rng): number {
  const initial = settings.initialBackoffMs ?? INFORMER_DEFAULTS.initialBackoffMs;
  const max = settings.maxBackoffMs ?? INFORMER_DEFAULTS.maxBackoffMs;
  const base = Math.min(initial * 2 ** Math.max(0, failures - 1), max);
  return jitter(base, 0.2, rng);
}

export interface FailureRetry {
  readonly delayMs: number;
  /** The server's `Retry-After`, when it sent one. */
  readonly retryAfterMs: number | undefined;
  /** The restart reason: `throttled` for a 429, else `error`. */
  readonly reason: 'throttled' | 'error';
}

/** The retry after a failed list or watch, given the backoff it has reached. */
export function retryAfterFailure(err: unknown, backoff: number): FailureRetry {
  const retryAfterMs = err instanceof KubeApiError ? err.retryAfterMs : undefined;
  const throttled = err instanceof KubeApiError && err.httpStatus === 429;
  // A 429/503 with Retry-After is the server asking for at least that long.
  return { delayMs: Math.max(backoff, retryAfterMs ?? 0), retryAfterMs, reason: throttled ? 'throttled' : 'error' };
}
