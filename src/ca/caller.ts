/** The authenticated caller of CreateCertificate, as every authenticator reports it. */
export interface Caller {
  /** Service account namespace and name (from `system:serviceaccount:<ns>:<sa>`). */
  readonly namespace: string;
  readonly serviceAccount: string;
  /** The pod the token is bound to, when it is a bound token. */
  readonly podName?: string;
  readonly podUid?: string;
  /** The cluster that vouched for the caller (`clusterid` metadata). */
  readonly clusterId: string;
  /** Which authenticator accepted the token (for logs/metrics). */
  readonly authenticator: 'tokenreview' | 'jwt';
  /** Token expiry, ms since epoch, when known. */
  readonly expiresAtMs?: number;
  /**
   * Where the node authorizer last found this caller's pod: written by the authorizer alone
   * (node-authorizer.ts), on the Caller object the token cache hands out for every call with the
   * same token, and trusted only while the pod's slot stamp is unchanged.
   */
  podNote?: CallerPodNote;
}

/** See `Caller.podNote`: a shortcut to the caller pod, never a decision. */
export interface CallerPodNote {
  /** The NodeAuthorizer that wrote it (its `id`); another one looks the pod up itself. */
  readonly authorizer: number;
  /** The caller fields it was checked against (a copy of the Caller with other fields carries a note that does not fit it). */
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly podName: string;
  readonly podUid: string;
  /** The caller's account is a registration authority (else a trusted node agent) for that authorizer. */
  readonly authority: boolean;
  /** PodSlots `instance`, slot and that slot's stamp when the pod was checked against the token. */
  readonly index: number;
  readonly slot: number;
  readonly stamp: number;
  /** The pod's node id then, -1 when unscheduled. */
  readonly node: number;
}

const SA_USER = /^system:serviceaccount:([a-z0-9]([-a-z0-9]*[a-z0-9])?):([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/;

/** Splits `system:serviceaccount:<ns>:<sa>`; undefined for any other user name. */
export function parseServiceAccountUser(username: string): { namespace: string; serviceAccount: string } | undefined {
  const m = SA_USER.exec(username);
  if (!m || m[1] === undefined || m[3] === undefined) return undefined;
  return { namespace: m[1], serviceAccount: m[3] };
}
