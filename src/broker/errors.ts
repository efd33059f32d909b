/**
 * The broker's error codes. Every error the broker raises on purpose is a `BrokerError` with one
 * of these codes; the gRPC and HTTP boundaries map its `status` once (src/ops/grpc-errors.ts).
 */
import { CertbrokerError, errCode, type CertbrokerErrorOptions } from '../core/errors.js';

export type BrokerErrorCode =
  /** The identity was forgotten (last pod gone) while a caller waited for it. */
  | 'ERR_IDENTITY_FORGOTTEN'
  /** No usable certificate for the identity and the last fetch failed. */
  | 'ERR_CERT_UNAVAILABLE'
  /** The CA answered with a leaf that does not carry exactly the requested SPIFFE ID (ztunnel's SanError). */
  | 'ERR_CA_SAN_MISMATCH'
  /** The CA answered with something that is not a usable chain. */
  | 'ERR_CA_BAD_RESPONSE'
  /** The CA's leaf breaks the X509-SVID rules (CA:TRUE, keyCertSign, cRLSign, no digitalSignature, ...). */
  | 'ERR_CA_LEAF_NOT_SVID'
  /** The CA call failed (transport or gRPC status); `grpcCode` says which. */
  | 'ERR_CA_CALL_FAILED'
  /** The broker could not obtain its own token. */
  | 'ERR_TOKEN_UNAVAILABLE'
  /** The Broker API request did not carry `broker.spiffe.io: true`. */
  | 'ERR_MISSING_BROKER_HEADER'
  /** The workload reference is missing, of an unsupported type, or names no workload (a uid that is not a UUID, pid 0). */
  | 'ERR_WORKLOAD_REFERENCE_INVALID'
  /** The caller may not use this kind of workload reference (BROKER_KUBERNETES_REFERENCE_CALLERS, BROKER_PID_REFERENCE_CALLERS). */
  | 'ERR_REFERENCE_TYPE_NOT_ALLOWED'
  /** The referenced pod is not on this node (or not known yet). */
  | 'ERR_WORKLOAD_NOT_FOUND'
  /** The referenced pod runs on this node but gets no identity (host network, terminating, finished, self). */
  | 'ERR_WORKLOAD_NOT_ENTITLED'
  /** The caller's SVID is valid but its SPIFFE ID is not on the Broker API allow-list. */
  | 'ERR_CALLER_NOT_AUTHORIZED'
  /** The caller presented no certificate that is a valid X509-SVID (no or several URI SANs, a CA, ...). */
  | 'ERR_CALLER_UNAUTHENTICATED'
  /** The request message cannot be read: it, or the workload reference packed in it, does not decode; or it is flagged compressed without grpc-encoding. */
  | 'ERR_REQUEST_MALFORMED'
  /** The pod left the node or was replaced; the stream ends. */
  | 'ERR_WORKLOAD_GONE'
  /** JWT-SVID profile is administratively disabled. */
  | 'ERR_JWT_PROFILE_DISABLED'
  /** A pod registration from the CNI plugin was malformed. */
  | 'ERR_REGISTRATION_INVALID'
  /** The broker is shutting down. */
  | 'ERR_SHUTTING_DOWN'
  /** A Workload API request did not carry `workload.spiffe.io: true`. */
  | 'ERR_MISSING_WORKLOAD_HEADER'
  /** The Workload API caller has no identity here: not in a pod's cgroup, its pod not an eligible pod of this node, or it changed since it connected. */
  | 'ERR_CALLER_NOT_ATTESTED'
  /** The kernel's word about the caller could not be read (SO_PEERCRED helper failed, /proc unreadable). */
  | 'ERR_ATTESTATION_UNAVAILABLE'
  /** The Workload API connection closed before the kernel's word about its caller was read (nothing to answer). */
  | 'ERR_PEER_CLOSED'
  /** A Workload API bound was reached: connections or streams of one caller, or of the whole socket. */
  | 'ERR_WORKLOAD_API_LIMIT'
  /** A socket directory that others could write to (they could replace the broker's socket with theirs). */
  | 'ERR_SOCKET_DIR_UNSAFE'
  /** Istio CA front: no `authorization: Bearer` token in the call. */
  | 'ERR_FRONT_NO_TOKEN'
  /** Istio CA front: `clusterid` names a cluster other than the broker's. */
  | 'ERR_FRONT_UNKNOWN_CLUSTER'
  /** Istio CA front: the caller's service account is not on ISTIO_CA_FRONT_ALLOWED_ACCOUNTS. */
  | 'ERR_FRONT_CALLER_NOT_ALLOWED'
  /** Istio CA front: the caller's token is not bound to a pod (TokenReview user.extra pod-name/pod-uid). */
  | 'ERR_FRONT_CALLER_NOT_POD_BOUND'
  /** Istio CA front: the caller's pod is not a running pod of this node with the token's UID and service account. */
  | 'ERR_FRONT_CALLER_NOT_ON_NODE'
  /** Istio CA front: the broker's pod watch has not listed this node's pods yet. */
  | 'ERR_FRONT_PODS_NOT_SYNCED'
  /** Istio CA front: ImpersonatedIdentity is not spiffe://<our td>/ns/<ns>/sa/<sa>. */
  | 'ERR_FRONT_IDENTITY_INVALID'
  /** Istio CA front: no pod of the impersonated service account runs on this node. */
  | 'ERR_FRONT_NO_POD_ON_NODE'
  /** Istio CA front: the CA refused the broker's forwarded request as unauthenticated. */
  | 'ERR_FRONT_CA_DENIED'
  /** Istio CA front: the CA shed the forwarded request (RESOURCE_EXHAUSTED); its retry pushback is relayed. */
  | 'ERR_FRONT_CA_BUSY'
  /** Istio CA front: the caller has too many requests in flight or exceeded its rate. */
  | 'ERR_FRONT_RATE_LIMITED'
  /** Istio CA front: validity_duration is negative or not an integer. */
  | 'ERR_FRONT_TTL_INVALID'
  /** Istio CA front: the caller reset the stream or its deadline passed while the call was being served. */
  | 'ERR_FRONT_CALL_CANCELLED';

export class BrokerError extends CertbrokerError<BrokerErrorCode> {
  constructor(
    code: BrokerErrorCode,
    message: string,
    options: CertbrokerErrorOptions,
  ) {
    super(code, message, options);
  }
}

/** True when `err` is an AbortError (our own cancellation), which is never worth logging as a failure. */
export function isAbortError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'AbortError' || errCode(err) === 'ABORT_ERR');
}

/** The streaming fronts' answer to a JWT-SVID RPC (UNIMPLEMENTED: clients must not retry). */
export function jwtProfileDisabled(): BrokerError {
  return new BrokerError('ERR_JWT_PROFILE_DISABLED', 'the JWT-SVID profile is administratively disabled on this broker', {
    status: 'unimplemented',
    publicMessage: 'JWT-SVID profile is disabled',
  });
}

/** How a front's stream ends when the broker stops (UNAVAILABLE). */
export function shuttingDown(): BrokerError {
  return new BrokerError('ERR_SHUTTING_DOWN', 'broker is shutting down', { status: 'unavailable', publicMessage: 'broker is shutting down' });
}
