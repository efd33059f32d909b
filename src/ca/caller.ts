/** The authenticated caller of CreateCertificate, as every authenticator reports it. */
export interface Caller {
  /** Service account namespace and name (from `system:serviceaccount:<ns>:<sa>`). */
  readonly namespace: string;
  readonly serviceAccount: string;
  /** The pod the token is bound to, when it is a bound token. */
  readonly podName?: string | undefined;
  readonly podUid?: string | undefined;
  /** The cluster that vouched for the caller (`clusterid` metadata). */
  readonly clusterId: string;
  /** Which authenticator accepted the token (for logs/metrics). */
  readonly authenticator: 'tokenreview' | 'jwt';
  /** Token expiry, ms since epoch, when known. */
  readonly expiresAtMs?: number | undefined;
  /**
   * Where the node authorizer last found this caller's pod: written by the authorizer alone
   * (node-authorizer.ts), on the Caller object the token cache hands out for every call with the
   * same token, and trusted only for this very object while the pod's slot is unchanged.
   */
  podNote?: CallerPodNote | undefined;
}

/** See `Caller.podNote`: a shortcut to the caller pod, never a decision. */
export interface CallerPodNote {
  /** The NodeAuthorizer that wrote it (its `id`); another one looks the pod up itself. */
  readonly authorizer: number;
  /**
   * The Caller object it was written on: a copy (`{ ...caller, podUid }`) carries the note along
   * but is not this object, so the note does not stand for it. Caller fields are never changed
   * after the authenticator made the object.
   */
  readonly caller: Caller;
  /** The caller's account is a registration authority (else a trusted node agent) for that authorizer. */
  readonly authority: boolean;
  /** PodSlots `instance`, slot and that slot's stamp when the pod was checked against the token. */
  readonly index: number;
  readonly slot: number;
  readonly stamp: number;
  /** The pod's node id then, -1 when unscheduled. */
  readonly node: number;
  /** PodSlots `watchEpoch` when the stamp was last seen unchanged (the authorizer moves it forward). */
  epoch: number;
}

/**
 * A Caller as the authenticators make it: every field present, in one order, `podNote` included
 * (undefined until the node authorizer notes the pod). Objects of one shape keep all their fields
 * inside the object, so the authorizer's read of a cached caller and its note touches the object's
 * own memory only; literals built with conditional spreads, or a note added later, put fields in a
 * separate backing store (one more cache miss per call on a large cluster).
 */
export function makeCaller(fields: Omit<Caller, 'podNote'>): Caller {
  return {
    namespace: fields.namespace,
    serviceAccount: fields.serviceAccount,
    podName: fields.podName,
    podUid: fields.podUid,
    clusterId: fields.clusterId,
    authenticator: fields.authenticator,
    expiresAtMs: fields.expiresAtMs,
    podNote: undefined,
  };
}

const SA_USER = /^system:serviceaccount:([a-z0-9]([-a-z0-9]*[a-z0-9])?):([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/;

/** Splits `system:serviceaccount:<ns>:<sa>`; undefined for any other user name. */
export function parseServiceAccountUser(username: string): { namespace: string; serviceAccount: string } | undefined {
  const m = SA_USER.exec(username);
  if (!m || m[1] === undefined || m[3] === undefined) return undefined;
  return { namespace: m[1], serviceAccount: m[3] };
}
