/**
 * What the certificate manager keeps per identity: who holds it, who waits for and listens to
 * its certificate, the certificate's `CertState`, the fetch in flight and the entry's three
 * timers (all in the manager's one `TimerQueue`). Plain TypeScript.
 */
import type { CertListener } from './cert-events.js';
import { PENDING, type CertState } from './cert-state.js';
import { ClockTimer, type TimerQueue } from './clock-timer.js';
import type { FetchPriority } from './priority-queue.js';
import type { Waiters } from './waiters.js';
import type { WorkloadCert } from './workload-cert.js';

export interface Entry {
  readonly identity: string;
  /** The pods holding the identity: the one holder itself (the common case, no Set), a Set from the second. */
  holders: string | Set<string> | undefined;
  /** Made by the first subscriber, dropped when the last leaves (most identities have none). */
  listeners: Set<CertListener> | undefined;
  /** Made by the first waiter, dropped once they are answered. */
  waiters: Waiters<WorkloadCert> | undefined;
  state: CertState;
  /** Priority to use for the next queued fetch (upgraded by waiters). */
  wanted: FetchPriority;
  inFlight: AbortController | undefined;
  /** The refresh (after a success) or retry (after a failure) timer. */
  readonly next: ClockTimer;
  /** Fires at the held certificate's notAfter and drops it. */
  readonly expiry: ClockTimer;
  /** Runs while no pod holds the identity; forgets it when it fires. */
  grace: ClockTimer | undefined;
  /** When the entry was created, until its first certificate arrives. */
  retainedAt: number | undefined;
}

/** A new entry, pending, created now. */
export function newEntry(options: { readonly identity: string; readonly wanted: FetchPriority; readonly timers: TimerQueue }): Entry {
  const { identity, wanted, timers } = options;
  return {
    identity,
    holders: undefined,
    listeners: undefined,
    waiters: undefined,
    state: PENDING,
    wanted,
    inFlight: undefined,
    next: new ClockTimer(timers),
    expiry: new ClockTimer(timers),
    grace: undefined,
    retainedAt: timers.clock.now(),
  };
}

/** Adds `holder` to the entry's holders (idempotent). */
export function addHolder(entry: Entry, holder: string): void {
  const h = entry.holders;
  if (h === undefined || h === holder) entry.holders = holder;
  else if (typeof h === 'string') entry.holders = new Set([h, holder]);
  else h.add(holder);
}

/** Removes `holder`; false when it did not hold the identity. */
export function removeHolder(entry: Entry, holder: string): boolean {
  const h = entry.holders;
  if (h === holder) entry.holders = undefined;
  else if (typeof h !== 'object' || !h.delete(holder)) return false;
  else if (h.size === 0) entry.holders = undefined;
  return true;
}

export function holderList(entry: Entry): string[] {
  const h = entry.holders;
  return h === undefined ? [] : typeof h === 'string' ? [h] : [...h];
}

/** The entry's waiters, detached (answered by the caller). */
export function takeWaiters(entry: Entry): Waiters<WorkloadCert> | undefined {
  const waiters = entry.waiters;
  entry.waiters = undefined;
  return waiters;
}

export function cancelTimers(entry: Entry): void {
  entry.grace?.cancel();
  entry.next.cancel();
  entry.expiry.cancel();
}
