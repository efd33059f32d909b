/**
 * The certificate manager: one entry per SPIFFE ID, fetched from the CA through a `CaClient`,
 * refreshed at half-life, retried with per-identity backoff, forgotten when its last pod has
 * been gone for a grace period. In the spirit of ztunnel's `identity/manager.rs`:
 *
 * - each entry's certificate is a `CertState` (cert-state.ts): pending | ready(cert) |
 *   failed(error, kept) | expired(at); a still-valid kept certificate keeps being served, and
 *   an expiry timer drops it at notAfter, so nothing expired is ever handed out;
 * - retries follow `retryDelay` (refresh-policy.ts); a keyed priority queue (realtime > warmup >
 *   background) feeds at most `maxConcurrentFetches` CA calls, one per identity at a time;
 * - listeners and observers (cert-events.ts) are called guarded: a throw is logged, nothing stops;
 * - timers go through the injected `Clock`, random choices through the injected `Rng`.
 *
 * Plain TypeScript: no gRPC, Kubernetes or filesystem code.
 */
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/log.js';
import type { Rng } from '../../core/rng.js';
import { addHolder, cancelTimers, holderList, newEntry, removeHolder, takeWaiters, type Entry } from './cert-entry.js';
import { ClockTimer, TimerQueue } from './clock-timer.js';
import { CertInterner } from './cert-interner.js';
import type { AllCertsListener, CertEvent, CertListener, CertManagerObserver } from './cert-events.js';
import {
  certExpired,
  failuresOf,
  fetchFailed,
  heldCert,
  identityStatus,
  refusalsOf,
  succeeded,
  type CertStateName,
  type IdentityStatus,
} from './cert-state.js';
import { BrokerError } from '../errors.js';
import { emitGuarded, guard, Listeners } from '../../core/listeners.js';
import { FetchSlots } from './fetch-slots.js';
import { Waiters } from './waiters.js';
import { isMoreUrgent, type FetchPriority } from './priority-queue.js';
import { DEFAULT_REFRESH_POLICY, fetchFailureInfoOf, refreshDelay, retryDelay, type RefreshPolicy } from './refresh-policy.js';
import { fetchOnce, isUsable, type CaClient, type FetchOutcome, type WorkloadCert } from './workload-cert.js';

export type { AllCertsListener, CertEvent, CertListener, CertManagerObserver } from './cert-events.js';
export type { CertState, CertStateName, IdentityStatus } from './cert-state.js';

export interface CertManagerOptions {
  readonly ca: CaClient;
  readonly clock: Clock;
  readonly rng: Rng;
  /** Default 8. */
  readonly maxConcurrentFetches?: number;
  /** How long an identity outlives its last pod. Default 30 000. */
  readonly forgetGraceMs?: number;
  readonly policy?: RefreshPolicy;
  /** One observer or several (each called on its own: metrics, logs). */
  readonly observer?: CertManagerObserver | readonly CertManagerObserver[];
  /** Where a throwing listener or observer is reported. Default: silent. */
  readonly logger?: Logger;
}

export class CertManager {
  readonly #ca: CaClient;
  readonly #clock: Clock;
  readonly #rng: Rng;
  readonly #graceMs: number;
  readonly #policy: RefreshPolicy;
  readonly #observers: readonly CertManagerObserver[];
  readonly #logger: Logger;
  readonly #entries = new Map<string, Entry>();
  /** Every entry's timers, behind one clock sleep. */
  readonly #timers: TimerQueue;
  /** Certificates as held: exact-size buffers, intermediates and roots shared by all entries. */
  readonly #interner = new CertInterner();
  readonly #slots: FetchSlots<string>;
  readonly #all = new Listeners<{ readonly identity: string; readonly event: CertEvent }>();
  #stopped = false;

  constructor(options: CertManagerOptions) {
    ({ ca: this.#ca, clock: this.#clock, rng: this.#rng } = options);
    this.#timers = new TimerQueue(this.#clock);
    this.#slots = new FetchSlots(options.maxConcurrentFetches ?? 8);
    this.#graceMs = options.forgetGraceMs ?? 30_000;
    this.#policy = options.policy ?? DEFAULT_REFRESH_POLICY;
    this.#observers = ([] as readonly CertManagerObserver[]).concat(options.observer ?? []);
    this.#logger = options.logger ?? silentLogger;
  }

  /** CA calls currently running. */
  get inFlight(): number {
    return this.#slots.running;
  }

  /** Highest number of simultaneous CA calls seen. */
  get peakInFlight(): number {
    return this.#slots.peak;
  }

  /** CA calls started so far. */
  get caCalls(): number {
    return this.#slots.started;
  }

  /** Identities waiting for a CA slot. */
  get queued(): number {
    return this.#slots.queued;
  }

  get size(): number {
    return this.#entries.size;
  }

  identities(): string[] {
    return [...this.#entries.keys()];
  }

  /**
   * Declares that `holder` (a pod UID) needs `identity`. The first holder creates the entry and
   * queues a fetch at `priority` (default warmup); any holder cancels a pending forget.
   */
  retain(identity: string, holder: string, priority: FetchPriority = 'warmup'): void {
    this.#assertRunning();
    let entry = this.#entries.get(identity);
    if (!entry) {
      entry = newEntry({ identity, wanted: priority, timers: this.#timers });
      this.#entries.set(identity, entry);
    }
    addHolder(entry, holder);
    entry.grace?.cancel();
    if (heldCert(entry.state) === undefined) this.#want(entry, priority);
  }

  /** `holder` no longer needs `identity`; once no holder is left for the grace period, it is forgotten. */
  release(identity: string, holder: string): void {
    const entry = this.#entries.get(identity);
    if (!entry || !removeHolder(entry, holder) || entry.holders !== undefined || entry.grace?.armed) return;
    entry.grace ??= new ClockTimer(this.#timers);
    entry.grace.arm(this.#graceMs, () => {
      if (entry.holders === undefined) this.#forget(entry);
    });
  }

  /** The certificate to serve now for `identity`, if any is still valid (also while a refresh is failing). */
  current(identity: string): WorkloadCert | undefined {
    const entry = this.#entries.get(identity);
    const cert = entry && heldCert(entry.state);
    return isUsable(cert, this.#clock.now()) ? cert : undefined;
  }

  /**
   * Resolves with a usable certificate: at once when one is held, otherwise after the next fetch
   * (queued at realtime priority). Rejects with ERR_CERT_UNAVAILABLE when that fetch fails and no
   * valid certificate exists, ERR_IDENTITY_FORGOTTEN when the identity is forgotten first.
   * The identity must have been retained.
   */
  waitForCert(identity: string, signal?: AbortSignal): Promise<WorkloadCert> {
    const entry = this.#entries.get(identity);
    if (!entry) {
      return Promise.reject(
        new BrokerError('ERR_IDENTITY_FORGOTTEN', `identity ${identity} is not tracked`, { status: 'not-found' }),
      );
    }
    const cert = this.current(identity);
    if (cert) return Promise.resolve(cert);
    const waiting = (entry.waiters ??= new Waiters()).wait(signal);
    if (!signal?.aborted) this.#want(entry, 'realtime');
    return waiting;
  }

  /**
   * Fetches `identity` again soon instead of at its refresh time (the trust bundle asks when the
   * held certificate chains to a root the CA dropped), at background priority. A fetch running,
   * queued or backing off is left to bring the new certificate; unknown identities are ignored.
   */
  refreshNow(identity: string): void {
    const entry = this.#entries.get(identity);
    if (entry === undefined || this.#stopped) return;
    this.#want(entry, 'background');
  }

  /** Calls `listener` on every new certificate for `identity` and when it is forgotten. */
  subscribe(identity: string, listener: CertListener): () => void {
    const entry = this.#entries.get(identity);
    if (!entry) {
      guard(() => listener({ type: 'forgotten' }), (err) => this.#threw('subscribe listener', identity, err));
      return () => undefined;
    }
    const listeners = (entry.listeners ??= new Set());
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && entry.listeners === listeners) entry.listeners = undefined;
    };
  }

  /**
   * Calls `listener` on every new certificate of every identity, and when one is forgotten. A
   * new certificate reaches these listeners before its waiters and per-identity subscribers, so
   * what they maintain (the trust bundle from the CA's roots) is current when those act.
   */
  subscribeAll(listener: AllCertsListener): () => void {
    return this.#all.add(({ identity, event }) => listener(identity, event));
  }

  status(identity: string): IdentityStatus | undefined {
    const e = this.#entries.get(identity);
    return e ? this.#statusOf(e) : undefined;
  }

  statuses(): IdentityStatus[] {
    return [...this.#entries.values()].map((e) => this.#statusOf(e));
  }

  /** Counts of identities by state (for `pod_certificate_states`-style metrics). */
  countByState(): Record<CertStateName, number> {
    const out: Record<CertStateName, number> = { pending: 0, ready: 0, failed: 0, expired: 0 };
    for (const e of this.#entries.values()) out[e.state.kind]++;
    return out;
  }

  /** Cancels every timer and CA call; waiters are rejected with ERR_SHUTTING_DOWN. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const entry of this.#entries.values()) {
      cancelTimers(entry);
      entry.inFlight?.abort();
      takeWaiters(entry)?.rejectAll(new BrokerError('ERR_SHUTTING_DOWN', 'broker is shutting down', { status: 'unavailable' }));
    }
    this.#entries.clear();
  }

  #statusOf(e: Entry): IdentityStatus {
    return identityStatus(e.identity, e.state, { holders: holderList(e), nextAttemptAt: e.next.due });
  }

  #assertRunning(): void {
    if (this.#stopped) throw new BrokerError('ERR_SHUTTING_DOWN', 'certificate manager is stopped', { status: 'unavailable' });
  }

  /**
   * Makes sure a fetch for `entry` will happen at least at `priority`: upgrades a queued fetch;
   * queues one when nothing is queued, running or backing off. A fetch in flight or a backoff in
   * progress is left alone (the CA is not hammered), but remembers the priority for its retry.
   */
  #want(entry: Entry, priority: FetchPriority): void {
    if (isMoreUrgent(priority, entry.wanted)) entry.wanted = priority;
    if (entry.inFlight) return;
    if (this.#slots.has(entry.identity)) {
      this.#slots.push(entry.identity, entry.wanted);
      return;
    }
    const backingOff = entry.next.armed && failuresOf(entry.state) > 0;
    if (backingOff) return;
    // A refresh timer may be armed, but someone needs the certificate now (it expired or is missing).
    entry.next.cancel();
    this.#slots.push(entry.identity, entry.wanted);
    this.#pump();
  }

  #pump(): void {
    while (!this.#stopped) {
      const entry = this.#slots.take((identity) => this.#entries.get(identity));
      if (entry === undefined) return;
      void this.#fetch(entry);
    }
  }

  async #fetch(entry: Entry): Promise<void> {
    const ac = new AbortController();
    const priority = entry.wanted;
    entry.inFlight = ac;
    this.#notify('fetchStarted', entry.identity, (o) => o.fetchStarted?.(entry.identity, priority));
    const started = this.#clock.now();
    let outcome: FetchOutcome;
    try {
      outcome = await fetchOnce(this.#ca, entry.identity, ac.signal, () => this.#clock.now());
    } finally {
      this.#slots.release();
      if (entry.inFlight === ac) entry.inFlight = undefined;
    }
    try {
      if (this.#entries.get(entry.identity) === entry && !ac.signal.aborted) {
        const durationMs = this.#clock.now() - started;
        if ('cert' in outcome) this.#onSuccess(entry, this.#interner.hold(entry.identity, outcome.cert), durationMs);
        else this.#onFailure(entry, outcome.failure, durationMs);
      }
    } finally {
      this.#pump();
    }
  }

  #onSuccess(entry: Entry, cert: WorkloadCert, durationMs: number): void {
    const now = this.#clock.now();
    const { identity } = entry;
    entry.state = succeeded(cert);
    this.#armExpiry(entry, cert);
    entry.wanted = 'background';
    this.#all.emit({ identity, event: { type: 'updated', cert } }, (err) => this.#threw('subscribeAll listener', identity, err));
    this.#notify('fetchSucceeded', identity, (o) => o.fetchSucceeded?.(identity, cert, durationMs));
    const retainedAt = entry.retainedAt;
    if (retainedAt !== undefined) {
      entry.retainedAt = undefined;
      this.#notify('firstReady', identity, (o) => o.firstReady?.(identity, now - retainedAt));
    }
    this.#arm(entry, refreshDelay(cert, now, this.#rng, this.#policy), 'background');
    takeWaiters(entry)?.resolveAll(cert);
    if (entry.listeners) emitGuarded(entry.listeners, { type: 'updated', cert }, (err) => this.#threw('subscribe listener', identity, err));
  }

  #onFailure(entry: Entry, err: unknown, durationMs: number): void {
    const now = this.#clock.now();
    const held = heldCert(entry.state);
    const keep = isUsable(held, now);
    if (!keep && held) this.#expire(entry, held);
    // A refusal backs off by the refusals in a row (a CA back from an outage that refuses once
    // is asked again soon), any other failure by all failures in a row, under a short ceiling.
    const failure = fetchFailureInfoOf(err);
    const refused = failure.kind === 'refused';
    const attempt = refused ? refusalsOf(entry.state) : failuresOf(entry.state);
    const delay = retryDelay(attempt, keep ? held : undefined, now, this.#rng, this.#policy, failure);
    entry.state = fetchFailed(entry.state, { error: err, refused, keep });
    this.#notify('fetchFailed', entry.identity, (o) => o.fetchFailed?.(entry.identity, err, durationMs, delay));
    if (!keep) {
      takeWaiters(entry)?.rejectAll(
        new BrokerError('ERR_CERT_UNAVAILABLE', `no certificate for ${entry.identity}: ${describeError(err)}`, {
          status: 'unavailable',
          cause: err,
          publicMessage: 'certificate not available yet',
        }),
      );
    }
    // Waiters were answered; a retry for a missing certificate is warmup, a refresh retry background.
    entry.wanted = 'background';
    this.#arm(entry, delay, keep ? 'background' : 'warmup');
  }

  /** Arms the entry's single refresh/retry timer: after `delayMs`, queue a fetch at `priority`. */
  #arm(entry: Entry, delayMs: number, priority: FetchPriority): void {
    entry.next.arm(delayMs, () => {
      if (this.#entries.get(entry.identity) !== entry) return;
      // Whoever asked meanwhile (a waiter, a new pod) may need it sooner than the timer's priority.
      const wanted = (entry.waiters?.size ?? 0) > 0 ? 'realtime' : entry.wanted;
      entry.wanted = isMoreUrgent(wanted, priority) ? wanted : priority;
      this.#slots.push(entry.identity, entry.wanted);
      this.#pump();
    });
  }

  /** Arms the entry's expiry timer for `cert` (replacing the previous certificate's). */
  #armExpiry(entry: Entry, cert: WorkloadCert): void {
    entry.expiry.arm(cert.notAfter - this.#clock.now(), () => {
      if (this.#entries.get(entry.identity) !== entry || heldCert(entry.state) !== cert) return;
      this.#expire(entry, cert);
      // A refresh armed past notAfter (a certificate shorter than the refresh floor) runs now;
      // a backoff in progress already ends at notAfter at the latest (retryDelay).
      this.#want(entry, 'warmup');
    });
  }

  /** Drops `cert`, which reached its notAfter: the entry holds nothing valid until the next success. */
  #expire(entry: Entry, cert: WorkloadCert): void {
    if (heldCert(entry.state) !== cert) return;
    entry.state = certExpired(entry.state, cert);
    entry.expiry.cancel();
    this.#notify('expired', entry.identity, (o) => o.expired?.(entry.identity, cert));
  }

  #forget(entry: Entry): void {
    const { identity } = entry;
    if (this.#entries.get(identity) !== entry) return;
    this.#entries.delete(identity);
    this.#slots.delete(identity);
    entry.inFlight?.abort();
    cancelTimers(entry);
    takeWaiters(entry)?.rejectAll(new BrokerError('ERR_IDENTITY_FORGOTTEN', `identity ${identity} was forgotten`, { status: 'not-found' }));
    const listeners = entry.listeners;
    entry.listeners = undefined;
    if (listeners) emitGuarded(listeners, { type: 'forgotten' }, (err) => this.#threw('subscribe listener', identity, err));
    this.#all.emit({ identity, event: { type: 'forgotten' } }, (err) => this.#threw('subscribeAll listener', identity, err));
    this.#notify('forgotten', identity, (o) => o.forgotten?.(identity));
  }

  /** The entry's waiters, to answer them all; the entry keeps none until the next one waits. */
  /** Calls `hook` on every observer, each guarded. */
  #notify(hook: keyof CertManagerObserver, identity: string, call: (observer: CertManagerObserver) => void): void {
    for (const observer of this.#observers) guard(() => call(observer), (err) => this.#threw(`observer ${hook}`, identity, err));
  }

  #threw(subscriber: string, identity: string | undefined, err: unknown): void {
    this.#logger.error('certificate manager subscriber threw; ignored', { subscriber, identity, err: describeError(err) });
  }
}
