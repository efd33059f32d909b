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
}

const SA_USER = /^system:serviceaccount:([a-z0-9]([-a-z0-9]*[a-z0-9])?):([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/;

/** Splits `system:serviceaccount:<ns>:<sa>`; undefined for any other user name. */
export function parseServiceAccountUser(username: string): { namespace: string; serviceAccount: string } | undefined {
  const m = SA_USER.exec(username);
  if (!m || m[1] === undefined || m[3] === undefined) return undefined;
  return { namespace: m[1], serviceAccount: m[3] };
}
