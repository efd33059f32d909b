/**
 * What the certificate manager knows about one identity's certificate, as a union whose states
 * carry their own data (ztunnel's `CertState`): a state cannot hold a field that means nothing
 * in it (an expiry instant while ready, an error while pending). The transitions are pure
 * functions; the manager applies them and runs the side effects (timers, waiters, events).
 *
 * - pending: nothing fetched yet, no failure yet.
 * - ready(cert): the last fetch succeeded.
 * - failed(error, failures, refusals, kept): the last `failures` fetches failed, the last
 *   `refusals` of them refused by the CA (refresh-policy.ts, `fetchFailureOf`); `kept` is the
 *   certificate still held from before (served while valid), undefined when there never was one.
 * - expired(at, failures, refusals, error): the certificate held reached its notAfter `at` with
 *   no successor and was dropped; nothing valid since (`error`: the last failure, if any).
 */
import { describeError } from '../../core/errors.js';
import type { WorkloadCert } from './workload-cert.js';

export type CertState =
  | { readonly kind: 'pending' }
  | { readonly kind: 'ready'; readonly cert: WorkloadCert }
  | { readonly kind: 'failed'; readonly error: unknown; readonly failures: number; readonly refusals: number; readonly kept: WorkloadCert | undefined }
  | { readonly kind: 'expired'; readonly at: number; readonly failures: number; readonly refusals: number; readonly error: unknown };

export type CertStateName = CertState['kind'];

export const PENDING: CertState = Object.freeze({ kind: 'pending' });

/** The certificate the state holds (valid or not yet noticed as expired), if any. */
export function heldCert(state: CertState): WorkloadCert | undefined {
  if (state.kind === 'ready') return state.cert;
  if (state.kind === 'failed') return state.kept;
  return undefined;
}

/** Fetches failed in a row (0 after a success). */
export function failuresOf(state: CertState): number {
  return state.kind === 'failed' || state.kind === 'expired' ? state.failures : 0;
}

/** The latest fetches in a row the CA refused (0 after a success or a failure of another kind). */
export function refusalsOf(state: CertState): number {
  return state.kind === 'failed' || state.kind === 'expired' ? state.refusals : 0;
}

/** The last failure, while the state remembers one. */
export function lastErrorOf(state: CertState): unknown {
  return state.kind === 'failed' || state.kind === 'expired' ? state.error : undefined;
}

/** A fetch succeeded. */
export function succeeded(cert: WorkloadCert): CertState {
  return { kind: 'ready', cert };
}

/**
 * A fetch failed with `error` (`refused`: the CA refused the identity); `keep` is whether the
 * held certificate is still valid. An expired state stays expired (with the new error);
 * otherwise the state is failed, keeping the held certificate when it is valid.
 */
export function fetchFailed(state: CertState, failure: { readonly error: unknown; readonly refused: boolean; readonly keep: boolean }): CertState {
  const { error } = failure;
  const failures = failuresOf(state) + 1;
  const refusals = failure.refused ? refusalsOf(state) + 1 : 0;
  if (state.kind === 'expired') return { kind: 'expired', at: state.at, failures, refusals, error };
  return { kind: 'failed', error, failures, refusals, kept: failure.keep ? heldCert(state) : undefined };
}

/** The held certificate reached its notAfter: dropped, the failure count and error kept. */
export function certExpired(state: CertState, cert: WorkloadCert): CertState {
  return { kind: 'expired', at: cert.notAfter, failures: failuresOf(state), refusals: refusalsOf(state), error: lastErrorOf(state) };
}

/** An identity as dumps, metrics and readiness see it (no key). */
export interface IdentityStatus {
  readonly identity: string;
  readonly state: CertStateName;
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

/** The status of `identity` in `state`. */
export function identityStatus(
  identity: string,
  state: CertState,
  extra: { readonly holders: readonly string[]; readonly nextAttemptAt: number | undefined },
): IdentityStatus {
  const cert = heldCert(state);
  const error = lastErrorOf(state);
  return {
    identity,
    state: state.kind,
    serial: cert?.serial,
    notBefore: cert?.notBefore,
    notAfter: cert?.notAfter,
    expiredAt: state.kind === 'expired' ? state.at : undefined,
    nextAttemptAt: extra.nextAttemptAt,
    holders: extra.holders,
    consecutiveFailures: failuresOf(state),
    lastError: error === undefined ? undefined : describeError(error),
  };
}
