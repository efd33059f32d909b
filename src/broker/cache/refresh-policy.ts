/**
 * When to refresh a certificate and how long to back off after a failed fetch. Pure functions of
 * numbers and an `Rng`, so the policy is tested without any clock.
 *
 * Retries after a failure (`retryDelay`) follow the certificate that is still held, as ztunnel
 * does: the schedule never waits past its notAfter, and the closer that is, the shorter the
 * backoff ceiling gets (a quarter of the time left, never below `urgentBackoffMaxMs`). With no
 * valid certificate at all (missing or expired) the ceiling is `urgentBackoffMaxMs`, so a CA
 * that answers again is used within seconds, not after a 150 s backoff.
 *
 * That short ceiling is for a CA that could not be reached or did not answer. A CA that answered
 * and refused the identity (`fetchFailureOf`: UNAUTHENTICATED, PERMISSION_DENIED,
 * INVALID_ARGUMENT, as the CA client reports them in the error model) will refuse the next try
 * too: those retries keep the full exponential backoff up to `backoffMaxMs`, so every node does
 * not ask again every 5 s (still never past a held certificate's notAfter).
 *
 * A CA that sheds load says when to come back (RESOURCE_EXHAUSTED with a retry pushback, which
 * the CA client keeps as the error's `retryAfterMs`): the retry then waits at least that long,
 * spread upwards by `pushbackJitter` so the nodes it turned away do not all return at once — even
 * past the short ceiling of a missing certificate (the CA asked for it), never past a held
 * certificate's notAfter nor `backoffMaxMs`. At a ceiling the jitter spreads below it, so retries
 * that reached the ceiling do not all fall on the ceiling itself.
 */
import { CertbrokerError, type ErrorStatus } from '../../core/errors.js';
import { jitter, type Rng } from '../../core/rng.js';

export interface CertLifetime {
  /** notBefore, ms since epoch. */
  readonly notBefore: number;
  /** notAfter, ms since epoch. */
  readonly notAfter: number;
}

export interface RefreshPolicy {
  /** Fraction of the lifetime after which to refresh (0.5 = half-life). */
  readonly refreshFraction: number;
  /** Spread of the refresh point, as a fraction of the refresh delay (0.1 = ±10 %). */
  readonly refreshJitter: number;
  /** First backoff delay. */
  readonly backoffBaseMs: number;
  readonly backoffFactor: number;
  /** Spread of each backoff delay (0.2 = ±20 %). */
  readonly backoffJitter: number;
  /** No backoff delay exceeds this, jitter included. */
  readonly backoffMaxMs: number;
  /** Floor of any refresh delay, so a skewed clock or an odd certificate cannot cause a fetch loop. */
  readonly minRefreshDelayMs: number;
  /**
   * While a still-valid certificate is held, no retry waits longer than this fraction of the time
   * it has left (0.25: with 10 min left, at most 150 s; with 40 s left, at most 10 s).
   */
  readonly expiringBackoffFraction: number;
  /**
   * Backoff ceiling while no valid certificate is held (missing or expired), and the lowest the
   * shrinking ceiling of an expiring one goes. Bounds how long a returning CA goes unnoticed.
   */
  readonly urgentBackoffMaxMs: number;
  /** A server's retry pushback P is waited as P to P × (1 + this), uniformly (0.5: up to 1.5 P). */
  readonly pushbackJitter: number;
}

export const DEFAULT_REFRESH_POLICY: RefreshPolicy = Object.freeze({
  refreshFraction: 0.5,
  refreshJitter: 0.1,
  backoffBaseMs: 500,
  backoffFactor: 2,
  backoffJitter: 0.2,
  backoffMaxMs: 150_000,
  minRefreshDelayMs: 1_000,
  expiringBackoffFraction: 0.25,
  urgentBackoffMaxMs: 5_000,
  pushbackJitter: 0.5,
});

/**
 * The instant (ms since epoch) at which to refresh `cert`: its half-life (by default) measured
 * from notBefore, spread by ±10 %. Uses the certificate's own dates, so a CA that imposes a
 * shorter lifetime than asked for is honoured automatically.
 */
export function refreshAt(cert: CertLifetime, rng: Rng, policy: RefreshPolicy = DEFAULT_REFRESH_POLICY): number {
  const lifetime = Math.max(0, cert.notAfter - cert.notBefore);
  return cert.notBefore + jitter(lifetime * policy.refreshFraction, policy.refreshJitter, rng);
}

/**
 * Delay before retry number `attempt` (0 for the first retry after one failure):
 * 500 ms × 2^attempt, ±20 %, never above 150 s. Once the doubling reaches the ceiling the delay
 * is spread over the 20 % below it (a capped ±20 % would put half of all retries on the ceiling
 * itself, in step with each other).
 */
export function backoff(attempt: number, rng: Rng, policy: RefreshPolicy = DEFAULT_REFRESH_POLICY): number {
  const n = Math.max(0, Math.floor(attempt));
  // Cap the exponent so the base never overflows to Infinity on absurd attempt counts.
  const base = policy.backoffBaseMs * Math.pow(policy.backoffFactor, Math.min(n, 64));
  if (base >= policy.backoffMaxMs) return policy.backoffMaxMs * (1 - policy.backoffJitter + policy.backoffJitter * rng());
  return Math.min(jitter(base, policy.backoffJitter, rng), policy.backoffMaxMs);
}

/**
 * How long to wait, from `now`, before refreshing `cert`: until `refreshAt` normally. When that
 * instant is already behind us (our clock runs ahead of the CA's, or the CA issued a very short
 * certificate), refresh at the same fraction of the lifetime that is left instead, so the
 * broker never loops on the CA; never sooner than `minRefreshDelayMs`.
 */
export function refreshDelay(cert: CertLifetime, now: number, rng: Rng, policy: RefreshPolicy = DEFAULT_REFRESH_POLICY): number {
  const at = refreshAt(cert, rng, policy);
  if (at > now) return Math.max(at - now, Math.min(policy.minRefreshDelayMs, cert.notAfter - now));
  const remaining = cert.notAfter - now;
  if (remaining <= 0) return policy.minRefreshDelayMs;
  return Math.max(policy.minRefreshDelayMs, jitter(remaining * policy.refreshFraction, policy.refreshJitter, rng));
}

/**
 * The backoff ceiling after a failed fetch at `now`: `urgentBackoffMaxMs` when `held` is missing
 * or expired; otherwise `expiringBackoffFraction` of its remaining lifetime, kept between
 * `urgentBackoffMaxMs` and `backoffMaxMs`.
 */
export function backoffCeiling(held: CertLifetime | undefined, now: number, policy: RefreshPolicy = DEFAULT_REFRESH_POLICY): number {
  const urgent = Math.min(policy.urgentBackoffMaxMs, policy.backoffMaxMs);
  if (held === undefined || now >= held.notAfter) return urgent;
  const share = (held.notAfter - now) * policy.expiringBackoffFraction;
  return Math.min(policy.backoffMaxMs, Math.max(urgent, share));
}

/**
 * Why a fetch failed, as far as retrying goes: `unreachable` — no answer (the CA down or
 * unreachable, a deadline, a transport error, a bad answer); `refused` — the CA answered and
 * refused this identity (it will answer the same until something changes on its side).
 */
export type FetchFailure = 'unreachable' | 'refused';

/** The statuses of a definite refusal (the CA client maps the CA's gRPC codes onto them). */
const REFUSALS: ReadonlySet<ErrorStatus> = new Set<ErrorStatus>(['unauthenticated', 'permission-denied', 'invalid-argument']);

/** How to retry after `err`: refused for a `CertbrokerError` whose status is a refusal, else unreachable. */
export function fetchFailureOf(err: unknown): FetchFailure {
  return err instanceof CertbrokerError && REFUSALS.has(err.status) ? 'refused' : 'unreachable';
}

/** A failed fetch as the retry reads it: its kind, and the wait the CA asked for, if it did. */
export interface FetchFailureInfo {
  readonly kind: FetchFailure;
  /** The CA's retry pushback (ms): no retry before it. */
  readonly retryAfterMs?: number;
}

/** `fetchFailureOf(err)` with the error's `retryAfterMs` (a CA's pushback), for `retryDelay`. */
export function fetchFailureInfoOf(err: unknown): FetchFailureInfo {
  const retryAfterMs = err instanceof CertbrokerError ? err.retryAfterMs : undefined;
  return { kind: fetchFailureOf(err), ...(retryAfterMs !== undefined && retryAfterMs >= 0 ? { retryAfterMs } : {}) };
}

/**
 * Delay before retry number `attempt` after a failed fetch at `now`, given the certificate still
 * `held` (if any): the exponential `backoff` under `backoffCeiling` (under `backoffMaxMs` alone
 * for a `refused` failure); at least the CA's pushback spread by `pushbackJitter` when it sent
 * one (under `backoffMaxMs`); and never past the held certificate's notAfter (the last retry
 * before expiry happens at expiry at the latest).
 */
export function retryDelay(
  attempt: number,
  held: CertLifetime | undefined,
  now: number,
  rng: Rng,
  policy: RefreshPolicy = DEFAULT_REFRESH_POLICY,
  failure: FetchFailure | FetchFailureInfo = 'unreachable',
): number {
  const info: FetchFailureInfo = typeof failure === 'string' ? { kind: failure } : failure;
  const ceiling = info.kind === 'refused' ? policy.backoffMaxMs : backoffCeiling(held, now, policy);
  let delay = backoff(attempt, rng, { ...policy, backoffMaxMs: ceiling });
  if (info.retryAfterMs !== undefined) {
    const asked = Math.min(info.retryAfterMs * (1 + policy.pushbackJitter * rng()), policy.backoffMaxMs);
    delay = Math.max(delay, asked);
  }
  if (held === undefined || now >= held.notAfter) return delay;
  return Math.min(delay, held.notAfter - now);
}
