/**
 * Leader election over one `coordination.k8s.io/v1` Lease, as client-go's `leaderelection`
 * does it, so certbroker replicas and client-go controllers read each other's Leases alike:
 *
 * - **Acquire**: read the Lease (create it when missing, `leaseTransitions` 0). Held by another
 *   identity and not expired -> wait a jittered retry period ([1, 2.2) × `retryPeriodMs`) and try
 *   again. Expired or released (empty holder) -> write ourselves in with the resourceVersion we
 *   read (`acquireTime` = `renewTime` = now, `leaseTransitions` + 1); a 409 means someone else
 *   wrote first, and we try again later.
 * - **Expiry is judged on our own clock**: a record counts as expired `leaseDurationSeconds`
 *   after *we first saw it in that state*, never by comparing its `renewTime` with our clock, so
 *   clock skew between replicas cannot hand the lease to two holders.
 * - **Renew** every `retryPeriodMs` (the leader writes straight onto the resourceVersion it last
 *   wrote; on a conflict it reads and decides again). Leadership ends when no renewal succeeded
 *   within `renewDeadlineMs`, or at once when the Lease names another holder.
 * - **Release** on stop (`releaseOnStop`, default true): holder '' and a 1 s duration, so a
 *   successor need not wait out the lease.
 *
 * Unlike client-go's `Run`, which returns after leadership is lost, the elector goes back to
 * acquiring until it is stopped: a replica that lost the lease keeps serving and stands again.
 *
 * `onStartedLeading(signal)` runs when leadership is gained; `signal` aborts when it ends (before
 * the release is written), then `onStoppedLeading()` runs. `onNewLeader(identity)` runs whenever
 * the observed holder changes. Timers run on the injected `Clock`; requests are bounded by the
 * Lease client's timeout. `stop(deadlineMs = 5000)` ends the loop, releases, and never rejects.
 */
import { systemClock, type Clock } from '../core/clock.js';
import { ConfigError } from '../core/config.js';
import { describeError } from '../core/errors.js';
import { settleWithin, stopOnAbort, type LongLived } from '../core/long-lived.js';
import { silentLogger, type Logger } from '../core/log.js';
import { systemRng, type Rng } from '../core/rng.js';
import { KubeApiError } from './errors.js';
import { LEADER_ELECTION_DEFAULTS, LEADER_ELECTION_JITTER_FACTOR, leaderElectionProblems, type LeaderElectionSettings } from './leader-election-settings.js';
import type { LeaseClient, LeaseRecord, StoredLease } from './lease-client.js';

export interface LeaderCallbacks {
  /** Leadership gained; `signal` aborts when it ends (lost, or the elector stops). */
  readonly onStartedLeading?: (signal: AbortSignal) => void;
  /** Leadership ended (after `signal` of onStartedLeading aborted). */
  readonly onStoppedLeading?: () => void;
  /** The observed holder changed ('' = nobody holds the lease). */
  readonly onNewLeader?: (identity: string) => void;
}

export interface LeaderElectorOptions extends Partial<LeaderElectionSettings>, LeaderCallbacks {
  readonly lease: LeaseClient;
  /** This candidate's holder identity; unique per process (e.g. pod name + a random suffix). */
  readonly identity: string;
  /** Write an empty holder on stop, so a successor takes over at once (default true). */
  readonly releaseOnStop?: boolean;
  readonly clock?: Clock;
  readonly rng?: Rng;
  readonly logger?: Logger;
}

/** What the elector tells `onChange` listeners (metrics, readiness). */
export type LeadershipChange =
  | { readonly type: 'gained' }
  | { readonly type: 'lost'; readonly reason: 'renew-deadline' | 'taken' | 'stopped' }
  | { readonly type: 'leader'; readonly identity: string }
  | { readonly type: 'failure'; readonly error: unknown };

/** How long `stop()` waits for the loop and the release by default. */
export const ELECTOR_STOP_DEADLINE_MS = 5_000;

function sameRecord(a: LeaseRecord, b: LeaseRecord): boolean {
  return a.holderIdentity === b.holderIdentity && a.leaseDurationSeconds === b.leaseDurationSeconds && a.acquireTimeMs === b.acquireTimeMs
    && a.renewTimeMs === b.renewTimeMs && a.leaseTransitions === b.leaseTransitions;
}

function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.httpStatus === 409;
}

export class LeaderElector implements LongLived {
  readonly #o: LeaderElectorOptions;
  readonly #s: LeaderElectionSettings;
  readonly #clock: Clock;
  readonly #rng: Rng;
  readonly #logger: Logger;
  readonly #releaseOnStop: boolean;
  readonly #stop = new AbortController();
  readonly #listeners = new Set<(change: LeadershipChange) => void>();
  #running: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;
  /** The Lease as last read or written, and when (our clock) we first saw that record. */
  #observed: StoredLease | undefined;
  #observedAtMs = 0;
  #leader = '';
  #leading: AbortController | undefined;

  constructor(options: LeaderElectorOptions) {
    this.#s = {
      leaseDurationMs: options.leaseDurationMs ?? LEADER_ELECTION_DEFAULTS.leaseDurationMs,
      renewDeadlineMs: options.renewDeadlineMs ?? LEADER_ELECTION_DEFAULTS.renewDeadlineMs,
      retryPeriodMs: options.retryPeriodMs ?? LEADER_ELECTION_DEFAULTS.retryPeriodMs,
    };
    const problems = leaderElectionProblems(this.#s);
    if (options.identity === '') problems.push('identity must not be empty');
    if (problems.length > 0) throw new ConfigError(problems);
    this.#o = options;
    this.#clock = options.clock ?? systemClock;
    this.#rng = options.rng ?? systemRng;
    this.#releaseOnStop = options.releaseOnStop ?? true;
    this.#logger = (options.logger ?? silentLogger).child({ lease: options.lease.location, identity: options.identity });
  }

  /** `namespace/name` of the Lease. */
  get lease(): string {
    return this.#o.lease.location;
  }

  get identity(): string {
    return this.#o.identity;
  }

  /** True while this candidate leads (from a successful write until leadership ends). */
  get isLeader(): boolean {
    return this.#leading !== undefined;
  }

  /** The holder as last observed ('' when none or not read yet). */
  get leader(): string {
    return this.#leader;
  }

  /** Tells `listener` about every change; returns the unsubscribe function. */
  onChange(listener: (change: LeadershipChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  start(signal?: AbortSignal): Promise<void> {
    if (this.#running === undefined && !this.#stop.signal.aborted) {
      stopOnAbort(signal, () => this.stop());
      this.#running = this.#run(this.#stop.signal).catch((err: unknown) => {
        this.#logger.error('leader election stopped unexpectedly', { error: describeError(err) });
      });
    }
    return Promise.resolve();
  }

  stop(deadlineMs = ELECTOR_STOP_DEADLINE_MS): Promise<void> {
    if (this.#stopped === undefined) {
      this.#stop.abort();
      this.#stopped = (this.#running ?? Promise.resolve()).then(() => this.#endLeadership('stopped'));
    }
    return settleWithin(this.#stopped, deadlineMs).then(() => undefined);
  }

  #emit(change: LeadershipChange): void {
    for (const l of [...this.#listeners]) {
      try {
        l(change);
      } catch (err) {
        this.#logger.warn('leadership listener failed', { error: describeError(err) });
      }
    }
  }

  async #run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (!(await this.#attempt(signal))) {
        await this.#sleep(this.#s.retryPeriodMs * (1 + LEADER_ELECTION_JITTER_FACTOR * this.#rng()), signal);
        continue;
      }
      this.#gain();
      let lastRenewMs = this.#clock.now();
      let reason: 'renew-deadline' | 'taken' | undefined;
      while (!signal.aborted && reason === undefined) {
        await this.#sleep(this.#s.retryPeriodMs, signal);
        if (signal.aborted) break;
        if (await this.#attempt(signal)) lastRenewMs = this.#clock.now();
        else if (this.#heldByOther()) reason = 'taken';
        else if (this.#clock.now() - lastRenewMs >= this.#s.renewDeadlineMs) reason = 'renew-deadline';
      }
      if (reason !== undefined) await this.#endLeadership(reason);
    }
  }

  #sleep(ms: number, signal: AbortSignal): Promise<void> {
    return this.#clock.sleep(ms, signal).catch(() => undefined);
  }

  #heldByOther(): boolean {
    const holder = this.#observed?.record.holderIdentity ?? '';
    return holder !== '' && holder !== this.#o.identity;
  }

  /** One try to acquire or renew; false when someone else holds the lease or the write failed. */
  async #attempt(signal: AbortSignal): Promise<boolean> {
    try {
      return await this.#tryAcquireOrRenew(signal);
    } catch (err) {
      if (signal.aborted) return false;
      if (isConflict(err)) this.#logger.debug('lease write conflicted, reading it again', { error: describeError(err) });
      else this.#logger.warn('lease request failed', { error: describeError(err) });
      this.#emit({ type: 'failure', error: err });
      return false;
    }
  }

  #desired(prev: LeaseRecord | undefined, nowMs: number): LeaseRecord {
    const mine = prev !== undefined && prev.holderIdentity === this.#o.identity;
    return {
      holderIdentity: this.#o.identity,
      leaseDurationSeconds: Math.round(this.#s.leaseDurationMs / 1000),
      acquireTimeMs: mine ? prev.acquireTimeMs : nowMs,
      renewTimeMs: nowMs,
      leaseTransitions: prev === undefined ? 0 : mine ? prev.leaseTransitions : prev.leaseTransitions + 1,
    };
  }

  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const { lease } = this.#o;
    const nowMs = this.#clock.now();
    if (this.#leading && this.#observed) {
      // Fast path: the leader writes onto what it wrote last; a conflict falls back to a read.
      try {
        this.#observe(await lease.update(this.#desired(this.#observed.record, nowMs), this.#observed.resourceVersion, signal), nowMs);
        return true;
      } catch (err) {
        if (signal.aborted || !isConflict(err)) throw err;
      }
    }
    const got = await lease.get(signal);
    if (got === undefined) {
      try {
        this.#observe(await lease.create(this.#desired(undefined, nowMs), signal), nowMs);
        return true;
      } catch (err) {
        if (isConflict(err)) return false; // another candidate created it first
        throw err;
      }
    }
    this.#observe(got, nowMs);
    const r = got.record;
    if (r.holderIdentity !== '' && r.holderIdentity !== this.#o.identity && this.#observedAtMs + r.leaseDurationSeconds * 1000 > nowMs) return false;
    this.#observe(await lease.update(this.#desired(r, nowMs), got.resourceVersion, signal), nowMs);
    return true;
  }

  #observe(stored: StoredLease, nowMs: number): void {
    if (this.#observed === undefined || !sameRecord(this.#observed.record, stored.record)) this.#observedAtMs = nowMs;
    this.#observed = stored;
    const holder = stored.record.holderIdentity;
    if (holder !== this.#leader) {
      this.#leader = holder;
      this.#logger.info('lease holder changed', { holder });
      this.#o.onNewLeader?.(holder);
      this.#emit({ type: 'leader', identity: holder });
    }
  }

  #gain(): void {
    const leading = new AbortController();
    this.#leading = leading;
    this.#logger.info('became leader');
    this.#emit({ type: 'gained' });
    try {
      this.#o.onStartedLeading?.(leading.signal);
    } catch (err) {
      this.#logger.warn('onStartedLeading failed', { error: describeError(err) });
    }
  }

  /** Aborts the leader's signal, releases the lease when stopping, then onStoppedLeading. */
  async #endLeadership(reason: 'renew-deadline' | 'taken' | 'stopped'): Promise<void> {
    const leading = this.#leading;
    if (leading === undefined) return;
    this.#leading = undefined;
    leading.abort();
    if (reason === 'stopped' && this.#releaseOnStop) await this.#release();
    this.#logger.info('stopped leading', { reason });
    this.#emit({ type: 'lost', reason });
    try {
      this.#o.onStoppedLeading?.();
    } catch (err) {
      this.#logger.warn('onStoppedLeading failed', { error: describeError(err) });
    }
  }

  /** Writes holder '' onto our own record; a conflict (a renewal cut short by the stop may have landed) reads once more. */
  async #release(): Promise<void> {
    const { lease } = this.#o;
    const nowMs = this.#clock.now();
    const released = (r: LeaseRecord): LeaseRecord => ({ holderIdentity: '', leaseDurationSeconds: 1, acquireTimeMs: nowMs, renewTimeMs: nowMs, leaseTransitions: r.leaseTransitions });
    try {
      let current = this.#observed;
      for (let attempt = 0; attempt < 2 && current !== undefined && current.record.holderIdentity === this.#o.identity; attempt++) {
        try {
          this.#observe(await lease.update(released(current.record), current.resourceVersion), nowMs);
          return;
        } catch (err) {
          if (!isConflict(err) || attempt > 0) throw err;
          current = await lease.get();
        }
      }
    } catch (err) {
      this.#logger.warn('could not release the lease (it expires on its own)', { error: describeError(err) });
    }
  }
}
