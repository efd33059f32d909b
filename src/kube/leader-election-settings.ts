/**
 * The timing of a Lease election, with client-go's defaults and its rules: the lease outlives
 * the renew deadline (a leader that cannot renew gives up before anyone may take over), and the
 * renew deadline leaves room for more than one jittered retry.
 */

export interface LeaderElectionSettings {
  /** How long a holder's claim stands after its last renewal, as others observe it (15 s). */
  readonly leaseDurationMs: number;
  /** How long the leader keeps trying to renew before it gives up leading (10 s). */
  readonly renewDeadlineMs: number;
  /** Wait between attempts: renewals every period, acquisitions jittered over [1, 2.2) periods (2 s). */
  readonly retryPeriodMs: number;
}

export const LEADER_ELECTION_DEFAULTS: LeaderElectionSettings = Object.freeze({
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
});

/** client-go's `JitterFactor`: an acquisition retry waits retryPeriod × (1 + 1.2 × rng). */
export const LEADER_ELECTION_JITTER_FACTOR = 1.2;

/**
 * Everything wrong with `s` (empty when it is usable), each setting named as in `names` and its
 * value shown by `show` (milliseconds by default; a reader of `_SECONDS` variables shows seconds).
 */
export function leaderElectionProblems(
  s: LeaderElectionSettings,
  names: Readonly<Record<keyof LeaderElectionSettings, string>> = { leaseDurationMs: 'leaseDurationMs', renewDeadlineMs: 'renewDeadlineMs', retryPeriodMs: 'retryPeriodMs' },
  show: (ms: number) => string = String,
): string[] {
  const out: string[] = [];
  const v = (k: keyof LeaderElectionSettings) => `${names[k]}=${show(s[k])}`;
  if (!(s.retryPeriodMs > 0)) out.push(`${v('retryPeriodMs')} must be greater than 0`);
  if (!(s.leaseDurationMs >= 1000) || s.leaseDurationMs % 1000 !== 0) out.push(`${v('leaseDurationMs')} must be a whole number of seconds, at least 1 (the Lease stores seconds)`);
  if (!(s.leaseDurationMs > s.renewDeadlineMs)) out.push(`${v('leaseDurationMs')} must be greater than ${v('renewDeadlineMs')}`);
  if (!(s.renewDeadlineMs > LEADER_ELECTION_JITTER_FACTOR * s.retryPeriodMs)) out.push(`${v('renewDeadlineMs')} must be greater than ${LEADER_ELECTION_JITTER_FACTOR} × ${v('retryPeriodMs')}`);
  return out;
}
