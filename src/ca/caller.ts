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
}

/**
 * A Caller as the authenticators make it (`makeCaller`), which the token cache then hands out for
 * every call with the same token. Besides the Caller fields it carries the node authorizer's note
 * of where it last found this caller's pod (node-authorizer.ts; written by the authorizer alone,
 * never a decision): the pod's slot in the index, the slot's stamp, the pod's node id and where
 * that node's table of active accounts is. The note
 * sits in the object itself, beside the fields the token cache reads on every call, so a warm
 * authorization reads no other object for it. Only an object of this class carries one: a copy
 * (`{ ...caller, podUid }`) is a plain object, so a note never stands for other fields than the
 * ones it was checked against; Caller fields are never changed after construction.
 */
export class AuthenticatedCaller implements Caller {
  // The token cache's field first, then the note (both read by every warm call: adjacent), then the other Caller fields.
  readonly expiresAtMs: number | undefined;
  /** The NodeAuthorizer (its `id`) that wrote the note; 0: none. */
  noteAuthorizer = 0;
  /** PodSlots `instance`, slot and that slot's stamp when the pod was checked against this caller. */
  noteIndex = 0;
  /** PodSlots `watchEpoch` when the stamp was last seen unchanged (the authorizer moves it forward). */
  noteEpoch = -1;
  /** The pod's node id then, -1 when unscheduled. */
  noteNode = -1;
  /** Where that node's table of active accounts was (PodSlots `tableBase`/`tableEntries`) when the note last stood. */
  noteTableBase = 0;
  noteTableEntries = 0;
  /** The caller's account is a registration authority (else a trusted node agent) for that authorizer. */
  noteAuthority = false;
  noteSlot = -1;
  noteStamp = 0;
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly podName: string | undefined;
  readonly podUid: string | undefined;
  readonly clusterId: string;
  readonly authenticator: 'tokenreview' | 'jwt';

  constructor(fields: Caller) {
    this.expiresAtMs = fields.expiresAtMs;
    this.namespace = fields.namespace;
    this.serviceAccount = fields.serviceAccount;
    this.podName = fields.podName;
    this.podUid = fields.podUid;
    this.clusterId = fields.clusterId;
    this.authenticator = fields.authenticator;
  }
}

/** The Caller the authenticators hand out: an AuthenticatedCaller (every field present, room for the authorizer's note). */
export function makeCaller(fields: Caller): AuthenticatedCaller {
  return new AuthenticatedCaller(fields);
}

const SA_USER = /^system:serviceaccount:([a-z0-9]([-a-z0-9]*[a-z0-9])?):([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/;

/** Splits `system:serviceaccount:<ns>:<sa>`; undefined for any other user name. */
export function parseServiceAccountUser(username: string): { namespace: string; serviceAccount: string } | undefined {
  const m = SA_USER.exec(username);
  if (!m || m[1] === undefined || m[3] === undefined) return undefined;
  return { namespace: m[1], serviceAccount: m[3] };
}
