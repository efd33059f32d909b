/**
 * When to refresh a certificate and how long to back off after a failed fetch. Pure functions of
 * numbers and an `Rng`, so the policy is tested without any clock.
 */
import { jitter, type Rng } from '../core/rng.js';

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
}

export const DEFAULT_REFRESH_POLICY: RefreshPolicy = Object.freeze({
  refreshFraction: 0.5,
  refreshJitter: 0.1,
  backoffBaseMs: 500,
  backoffFactor: 2,
  backoffJitter: 0.2,
  backoffMaxMs: 150_000,
  minRefreshDelayMs: 1_000,
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
 * 500 ms × 2^attempt, ±20 %, never above 150 s.
 */
export function backoff(attempt: number, rng: Rng, policy: RefreshPolicy = DEFAULT_REFRESH_POLICY): number {
  const n = Math.max(0, Math.floor(attempt));
  // Cap the exponent so the base never overflows to Infinity on absurd attempt counts.
  const base = Math.min(policy.backoffBaseMs * Math.pow(policy.backoffFactor, Math.min(n, 64)), policy.backoffMaxMs);
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
