/**
 * The certificate manager: one entry per SPIFFE ID, fetched from the CA through a `CaClient`,
 * refreshed at half-life, retried with per-identity backoff, forgotten when its last pod has
 * been gone for a grace period. In the spirit of ztunnel's `identity/manager.rs`:
 *
 * - states pending | ready | failed | expired (failed may still hold a valid certificate, which
 *   keeps being served; expired: the certificate held passed its notAfter and was dropped, none
 *   valid since — nothing expired is ever handed out);
 * - retries follow `retryDelay` (refresh-policy.ts): never past the held certificate's notAfter,
 *   with a ceiling that shrinks as it nears, and short while none is valid;
 * - a keyed priority queue (realtime > warmup > background) feeds at most `maxConcurrentFetches`
 *   CA calls; a key is queued or in flight at most once, so duplicate requests share one call;
 * - every timer goes through the injected `Clock`, every random choice through the injected `Rng`.
 *
 * Plain TypeScript: no gRPC, Kubernetes or filesystem code.
 */
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Rng } from '../core/rng.js';
import { BrokerError, isAbortError } from './errors.js';
import { isMoreUrgent, KeyedPriorityQueue, type FetchPriority } from './priority-queue.js';
import { DEFAULT_REFRESH_POLICY, refreshDelay, retryDelay, type RefreshPolicy } from './refresh-policy.js';
import { Waiters } from './waiters.js';
import { isUsable, type CaClient, type WorkloadCert } from './workload-cert.js';

export type CertState = 'pending' | 'ready' | 'failed' | 'expired';

export type CertEvent =
  | { readonly type: 'updated'; readonly cert: WorkloadCert }
  | { readonly type: 'forgotten' };

export type CertListener = (event: CertEvent) => void;

/** Hooks for metrics and logs; all optional. */
export interface CertManagerObserver {
  fetchStarted?(identity: string, priority: FetchPriority): void;
  fetchSucceeded?(identity: string, cert: WorkloadCert, durationMs: number): void;
  fetchFailed?(identity: string, err: unknown, durationMs: number, nextAttemptInMs: number): void;
  /** First certificate for an identity since it was first retained (registration -> ready). */
  firstReady?(identity: string, sinceRetainedMs: number): void;
  /** The certificate held reached its notAfter with no newer one: it was dropped (state `expired`). */
  expired?(identity: string, cert: WorkloadCert): void;
  forgotten?(identity: string): void;
}

export interface CertManagerOptions {
  readonly ca: CaClient;
  readonly clock: Clock;
  readonly rng: Rng;
  /** Default 8. */
  readonly maxConcurrentFetches?: number;
  /** How long an identity outlives its last pod. Default 30 000. */
  readonly forgetGraceMs?: number;
  readonly policy?: RefreshPolicy;
  readonly observer?: CertManagerObserver;
}

export interface IdentityStatus {
  readonly identity: string;
  readonly state: CertState;
  readonly serial: string | undefined;
  readonly notBefore: number | undefined;
  readonly notAfter: number | undefined;
  /** In state `expired`: the notAfter of the certificate that expired (ms since epoch). */
  readonly expiredAt: number | undefined;
  /** When the next refresh or retry is due (ms since epoch), if one is armed. */
  readonly nextAttemptAt: number | undefined;
  readonly holders: readonly string[];
  readonly consecutiveFailures: number;
  readonly lastError: string | undefined;
}

interface Entry {
  readonly identity: string;
  readonly holders: Set<string>;
  readonly listeners: Set<CertListener>;
  readonly waiters: Waiters<WorkloadCert>;
  state: CertState;
  cert: WorkloadCert | undefined;
  lastError: unknown;
  consecutiveFailures: number;
  /** Priority to use for the next queued fetch (upgraded by waiters). */
  wanted: FetchPriority;
  inFlight: AbortController | undefined;
  /** The armed refresh or backoff timer. */
  timer: AbortController | undefined;
  timerDue: number | undefined;
  /** Fires at the held certificate's notAfter and drops it. */
  expiry: AbortController | undefined;
  /** notAfter of the last certificate that expired without a successor. */
  expiredAt: number | undefined;
  grace: AbortController | undefined;
  /** When the entry was created, until its first certificate arrives. */
  retainedAt: number | undefined;
}

export class CertManager {
  readonly #ca: CaClient;
  readonly #clock: Clock;
  readonly #rng: Rng;
  readonly #max: number;
  readonly #graceMs: number;
  readonly #policy: RefreshPolicy;
  readonly #observer: CertManagerObserver;
  readonly #entries = new Map<string, Entry>();
  readonly #queue = new KeyedPriorityQueue<string>();
  #inFlight = 0;
  #peakInFlight = 0;
  #caCalls = 0;
  #stopped = false;

  constructor(options: CertManagerOptions) {
    this.#ca = options.ca;
    this.#clock = options.clock;
    this.#rng = options.rng;
    this.#max = options.maxConcurrentFetches ?? 8;
    this.#graceMs = options.forgetGraceMs ?? 30_000;
    this.#policy = options.policy ?? DEFAULT_REFRESH_POLICY;
    this.#observer = options.observer ?? {};
    if (!Number.isInteger(this.#max) || this.#max < 1) throw new RangeError(`maxConcurrentFetches must be >= 1, got ${this.#max}`);
  }

  /** CA calls currently running. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Highest number of simultaneous CA calls seen. */
  get peakInFlight(): number {
    return this.#peakInFlight;
  }

  /** CA calls started so far. */
  get caCalls(): number {
    return this.#caCalls;
  }

  /** Identities waiting for a CA slot. */
  get queued(): number {
    return this.#queue.size;
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
      entry = {
        identity,
        holders: new Set(),
        listeners: new Set(),
        waiters: new Waiters(),
        state: 'pending',
        cert: undefined,
        lastError: undefined,
        consecutiveFailures: 0,
        wanted: priority,
        inFlight: undefined,
        timer: undefined,
        timerDue: undefined,
        expiry: undefined,
        expiredAt: undefined,
        grace: undefined,
        retainedAt: this.#clock.now(),
      };
      this.#entries.set(identity, entry);
    }
    entry.holders.add(holder);
    if (entry.grace) {
      entry.grace.abort();
      entry.grace = undefined;
    }
    if (entry.cert === undefined) this.#want(entry, priority);
  }

  /** `holder` no longer needs `identity`; once no holder is left for the grace period, it is forgotten. */
  release(identity: string, holder: string): void {
    const entry = this.#entries.get(identity);
    if (!entry || !entry.holders.delete(holder) || entry.holders.size > 0 || entry.grace) return;
    const grace = new AbortController();
    entry.grace = grace;
    this.#clock.sleep(this.#graceMs, grace.signal).then(
      () => {
        if (entry.grace === grace && entry.holders.size === 0) this.#forget(entry);
      },
      () => undefined,
    );
  }

  /** The certificate to serve now for `identity`, if any is still valid (also while a refresh is failing). */
  current(identity: string): WorkloadCert | undefined {
    const cert = this.#entries.get(identity)?.cert;
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
    const waiting = entry.waiters.wait(signal);
    if (!signal?.aborted) this.#want(entry, 'realtime');
    return waiting;
  }

  /** Calls `listener` on every new certificate for `identity` and when it is forgotten. */
  subscribe(identity: string, listener: CertListener): () => void {
    const entry = this.#entries.get(identity);
    if (!entry) {
      listener({ type: 'forgotten' });
      return () => undefined;
    }
    entry.listeners.add(listener);
    return () => entry.listeners.delete(listener);
  }

  status(identity: string): IdentityStatus | undefined {
    const e = this.#entries.get(identity);
    return e ? this.#statusOf(e) : undefined;
  }

  statuses(): IdentityStatus[] {
    return [...this.#entries.values()].map((e) => this.#statusOf(e));
  }

  /** Counts of identities by state (for `pod_certificate_states`-style metrics). */
  countByState(): Record<CertState, number> {
    const out: Record<CertState, number> = { pending: 0, ready: 0, failed: 0, expired: 0 };
    for (const e of this.#entries.values()) out[e.state]++;
    return out;
  }

  /** Cancels every timer and CA call; waiters are rejected with ERR_SHUTTING_DOWN. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const entry of this.#entries.values()) {
      entry.grace?.abort();
      entry.timer?.abort();
      entry.expiry?.abort();
      entry.inFlight?.abort();
      entry.waiters.rejectAll(new BrokerError('ERR_SHUTTING_DOWN', 'broker is shutting down', { status: 'unavailable' }));
    }
    this.#entries.clear();
  }

  #statusOf(e: Entry): IdentityStatus {
    return {
      identity: e.identity,
      state: e.state,
      serial: e.cert?.serial,
      notBefore: e.cert?.notBefore,
      notAfter: e.cert?.notAfter,
      expiredAt: e.cert === undefined ? e.expiredAt : undefined,
      nextAttemptAt: e.timerDue,
      holders: [...e.holders],
      consecutiveFailures: e.consecutiveFailures,
      lastError: e.lastError === undefined ? undefined : describeError(e.lastError),
    };
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
    if (this.#queue.has(entry.identity)) {
      this.#queue.push(entry.identity, entry.wanted);
      return;
    }
    const backingOff = entry.timer !== undefined && entry.consecutiveFailures > 0;
    if (backingOff) return;
    if (entry.timer) {
      // A refresh timer is armed but someone needs the certificate now (it expired or is missing).
      entry.timer.abort();
      entry.timer = undefined;
      entry.timerDue = undefined;
    }
    this.#queue.push(entry.identity, entry.wanted);
    this.#pump();
  }

  #pump(): void {
    while (!this.#stopped && this.#inFlight < this.#max) {
      const identity = this.#queue.pop();
      if (identity === undefined) return;
      const entry = this.#entries.get(identity);
      if (entry) void this.#fetch(entry);
    }
  }

  async #fetch(entry: Entry): Promise<void> {
    const ac = new AbortController();
    const priority = entry.wanted;
    entry.inFlight = ac;
    this.#inFlight++;
    this.#caCalls++;
    if (this.#inFlight > this.#peakInFlight) this.#peakInFlight = this.#inFlight;
    this.#observer.fetchStarted?.(entry.identity, priority);
    const started = this.#clock.now();
    let cert: WorkloadCert | undefined;
    let failure: unknown;
    try {
      const answer = await this.#ca.fetchCertificate(entry.identity, ac.signal);
      if (this.#clock.now() < answer.notAfter) cert = answer;
      else {
        // A CA with a clock far behind ours (or a replayed answer): never hand this out.
        failure = new BrokerError(
          'ERR_CA_BAD_RESPONSE',
          `CA returned a certificate for ${entry.identity} that expired at ${new Date(answer.notAfter).toISOString()}`,
          { status: 'unavailable', publicMessage: 'CA returned an expired certificate' },
        );
      }
    } catch (err) {
      failure = err ?? new Error('CA call failed');
    } finally {
      this.#inFlight--;
      if (entry.inFlight === ac) entry.inFlight = undefined;
    }
    const live = this.#entries.get(entry.identity) === entry && !ac.signal.aborted;
    if (live) {
      const durationMs = this.#clock.now() - started;
      if (cert) this.#onSuccess(entry, cert, durationMs);
      else this.#onFailure(entry, failure, durationMs);
    }
    this.#pump();
  }

  #onSuccess(entry: Entry, cert: WorkloadCert, durationMs: number): void {
    const now = this.#clock.now();
    entry.cert = cert;
    entry.state = 'ready';
    entry.expiredAt = undefined;
    this.#armExpiry(entry, cert);
    entry.lastError = undefined;
    entry.consecutiveFailures = 0;
    entry.wanted = 'background';
    this.#observer.fetchSucceeded?.(entry.identity, cert, durationMs);
    if (entry.retainedAt !== undefined) {
      this.#observer.firstReady?.(entry.identity, now - entry.retainedAt);
      entry.retainedAt = undefined;
    }
    this.#arm(entry, refreshDelay(cert, now, this.#rng, this.#policy), 'background');
    entry.waiters.resolveAll(cert);
    for (const l of [...entry.listeners]) l({ type: 'updated', cert });
  }

  #onFailure(entry: Entry, err: unknown, durationMs: number): void {
    const now = this.#clock.now();
    const keep = isUsable(entry.cert, now);
    if (!keep && entry.cert) this.#expire(entry, entry.cert);
    const delay = retryDelay(entry.consecutiveFailures, keep ? entry.cert : undefined, now, this.#rng, this.#policy);
    entry.consecutiveFailures++;
    entry.lastError = err;
    entry.state = !keep && entry.expiredAt !== undefined ? 'expired' : 'failed';
    this.#observer.fetchFailed?.(entry.identity, err, durationMs, delay);
    if (!keep) {
      entry.waiters.rejectAll(
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
    entry.timer?.abort();
    const timer = new AbortController();
    entry.timer = timer;
    const delay = Math.max(0, delayMs);
    entry.timerDue = this.#clock.now() + delay;
    this.#clock.sleep(delay, timer.signal).then(
      () => {
        if (entry.timer !== timer || this.#entries.get(entry.identity) !== entry) return;
        entry.timer = undefined;
        entry.timerDue = undefined;
        // Whoever asked meanwhile (a waiter, a new pod) may need it sooner than the timer's priority.
        const wanted = entry.waiters.size > 0 ? 'realtime' : entry.wanted;
        entry.wanted = isMoreUrgent(wanted, priority) ? wanted : priority;
        this.#queue.push(entry.identity, entry.wanted);
        this.#pump();
      },
      (err: unknown) => {
        if (!isAbortError(err) && !timer.signal.aborted) throw err;
      },
    );
  }

  /** Arms the entry's expiry timer for `cert` (replacing the previous certificate's). */
  #armExpiry(entry: Entry, cert: WorkloadCert): void {
    entry.expiry?.abort();
    const expiry = new AbortController();
    entry.expiry = expiry;
    this.#clock.sleep(Math.max(0, cert.notAfter - this.#clock.now()), expiry.signal).then(
      () => {
        if (entry.expiry !== expiry || this.#entries.get(entry.identity) !== entry || entry.cert !== cert) return;
        this.#expire(entry, cert);
        // A refresh armed past notAfter (a certificate shorter than the refresh floor) runs now;
        // a backoff in progress already ends at notAfter at the latest (retryDelay).
        this.#want(entry, 'warmup');
      },
      (err: unknown) => {
        if (!isAbortError(err) && !expiry.signal.aborted) throw err;
      },
    );
  }

  /** Drops `cert`, which reached its notAfter: the entry holds nothing valid until the next success. */
  #expire(entry: Entry, cert: WorkloadCert): void {
    if (entry.cert !== cert) return;
    entry.cert = undefined;
    entry.expiredAt = cert.notAfter;
    entry.state = 'expired';
    if (entry.expiry) {
      entry.expiry.abort();
      entry.expiry = undefined;
    }
    this.#observer.expired?.(entry.identity, cert);
  }

  #forget(entry: Entry): void {
    if (this.#entries.get(entry.identity) !== entry) return;
    this.#entries.delete(entry.identity);
    this.#queue.delete(entry.identity);
    entry.inFlight?.abort();
    entry.timer?.abort();
    entry.expiry?.abort();
    entry.grace = undefined;
    entry.waiters.rejectAll(new BrokerError('ERR_IDENTITY_FORGOTTEN', `identity ${entry.identity} was forgotten`, { status: 'not-found' }));
    for (const l of [...entry.listeners]) l({ type: 'forgotten' });
    entry.listeners.clear();
    this.#observer.forgotten?.(entry.identity);
  }
}
