/**
 * The informer's tunables as plain data, and how components read them from the environment.
 * No @kubernetes/client-node here: config modules import this without loading the client.
 *
 * The idle watchdog closes a watch that delivered neither an event nor a bookmark for
 * `idleTimeoutMs` and re-opens it from the last resourceVersion (a hung API server replica or
 * proxy keeps the connection open and silent). kube-apiserver's watch cache sends a bookmark
 * about once a minute on a watch that asks for them, so the default sits a bit above that.
 */
import type { ConfigReader } from '../core/config.js';

export interface InformerSettings {
  /** Watchdog: no event and no bookmark for this long -> close and re-watch (default 90 s). */
  readonly idleTimeoutMs?: number;
  /** Items per list page (`limit`; default 500, as client-go). */
  readonly pageSize?: number;
  /** Each watch asks the server to end it after a random time in [min, 2×min) (default 300 s, as client-go). */
  readonly minWatchTimeoutSeconds?: number;
  /** Deadline of one list page (default 30 s). */
  readonly requestTimeoutMs?: number;
  /** First retry delay after an error; doubles per consecutive failure up to `maxBackoffMs` (±20 % jitter). */
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

export const INFORMER_DEFAULTS = Object.freeze({
  idleTimeoutMs: 90_000,
  pageSize: 500,
  minWatchTimeoutSeconds: 300,
  requestTimeoutMs: 30_000,
  initialBackoffMs: 500,
  maxBackoffMs: 30_000,
});

/** Readiness fails when the informer heard nothing (no list, event or bookmark) for this many watchdog windows. */
export const STALE_AFTER_IDLE_WINDOWS = 2;

export const INFORMER_ENV = Object.freeze({
  IDLE_TIMEOUT_SECONDS: 'KUBE_WATCH_IDLE_TIMEOUT_SECONDS',
  PAGE_SIZE: 'KUBE_LIST_PAGE_SIZE',
});

/** The settings from `KUBE_WATCH_IDLE_TIMEOUT_SECONDS` and `KUBE_LIST_PAGE_SIZE` (problems go to `r`). */
export function readInformerSettings(r: ConfigReader): InformerSettings {
  const idleSeconds = r.int(INFORMER_ENV.IDLE_TIMEOUT_SECONDS, INFORMER_DEFAULTS.idleTimeoutMs / 1000, { min: 5, max: 3600 });
  const pageSize = r.int(INFORMER_ENV.PAGE_SIZE, INFORMER_DEFAULTS.pageSize, { min: 1, max: 100_000 });
  return Object.freeze({ idleTimeoutMs: idleSeconds * 1000, pageSize });
}
