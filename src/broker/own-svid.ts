/**
 * The broker's own SVID as readiness and metrics report it: ready (a valid one is served),
 * expired (the last one passed its notAfter and none replaced it yet: the Broker API refuses new
 * connections meanwhile) or missing (none obtained since start). Pure.
 */
import type { IdentityStatus } from './cache/cert-manager.js';

export type OwnSvidState = 'ready' | 'expired' | 'missing';

export const OWN_SVID_STATES: readonly OwnSvidState[] = ['ready', 'expired', 'missing'];

export interface OwnSvid {
  readonly state: OwnSvidState;
  /** notAfter of the SVID served (ready) or of the one that expired (expired), ms since epoch. */
  readonly notAfter: number | undefined;
}

/** The own SVID's state at `now`, from its certificate manager entry. */
export function ownSvidOf(status: IdentityStatus | undefined, now: number): OwnSvid {
  if (status?.notAfter !== undefined) {
    return { state: now < status.notAfter ? 'ready' : 'expired', notAfter: status.notAfter };
  }
  if (status?.expiredAt !== undefined) return { state: 'expired', notAfter: status.expiredAt };
  return { state: 'missing', notAfter: undefined };
}

/** The readiness reason for `svid`, undefined when ready. */
export function ownSvidProblem(svid: OwnSvid): string | undefined {
  switch (svid.state) {
    case 'ready':
      return undefined;
    case 'expired':
      return `own SVID expired at ${new Date(svid.notAfter!).toISOString()}, renewing`;
    case 'missing':
      return 'own SVID not obtained yet';
  }
}
