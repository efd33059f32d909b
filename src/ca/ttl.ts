/**
 * Certificate lifetime rules (pure): 0 or absent asks for the default; negative is invalid;
 * over the maximum is rejected (not clamped, as istiod does); notBefore is backdated to absorb
 * clock skew; notAfter never passes the signer's own notAfter.
 */
import { CaError } from './errors.js';

export interface TtlPolicy {
  readonly defaultTtlSeconds: number;
  readonly maxTtlSeconds: number;
  readonly backdateSeconds: number;
}

export interface Validity {
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
  readonly ttlSeconds: number;
}

/** The lifetime to issue for `requestedSeconds` (proto int64 as a number; 0 = default). */
export function resolveTtlSeconds(requestedSeconds: number, policy: TtlPolicy): number {
  if (!Number.isFinite(requestedSeconds) || !Number.isInteger(requestedSeconds) || requestedSeconds < 0) {
    throw new CaError('ERR_CA_TTL_INVALID', `validity_duration ${String(requestedSeconds)} is not a non-negative number of seconds`, {
      status: 'invalid-argument',
      publicMessage: 'validity_duration must be a non-negative number of seconds',
    });
  }
  if (requestedSeconds === 0) return policy.defaultTtlSeconds;
  if (requestedSeconds > policy.maxTtlSeconds) {
    throw new CaError('ERR_CA_TTL_OVER_MAX', `validity_duration ${requestedSeconds}s is over the maximum ${policy.maxTtlSeconds}s`, {
      status: 'invalid-argument',
      publicMessage: `requested TTL ${requestedSeconds}s is greater than the max allowed TTL ${policy.maxTtlSeconds}s`,
    });
  }
  return requestedSeconds;
}

export function validityFor(options: {
  readonly nowMs: number;
  readonly ttlSeconds: number;
  readonly backdateSeconds: number;
  readonly signerNotAfterMs: number;
}): Validity {
  const notBeforeMs = options.nowMs - options.backdateSeconds * 1000;
  const notAfterMs = Math.min(options.nowMs + options.ttlSeconds * 1000, options.signerNotAfterMs);
  return { notBeforeMs, notAfterMs, ttlSeconds: options.ttlSeconds };
}
