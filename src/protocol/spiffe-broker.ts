/**
 * The SPIFFE Broker API (`spiffe.broker.API`, proto/spiffe/broker/broker.proto): the one place its
 * names, the security header, the workload-reference type URLs, the standard's ErrorInfo domain
 * and reasons, and the message shapes are written. The broker's Broker API service and server,
 * the Broker API client (`certbroker fetch`, tests, benchmarks) and the reference codec use them.
 *
 * A call: a server-streaming (or, for JWT, unary) RPC with `broker.spiffe.io: true` in the call
 * metadata and a `WorkloadReference` whose `Any` packs the reference of the workload served.
 */
import type { X509BundlesResponse, X509SVIDResponse } from './spiffe-x509.js';
import type { ProtoAny } from './protobuf-types.js';
import { typeUrlOf } from './protobuf-types.js';

/** The .proto file, relative to `proto/`. */
export const BROKER_PROTO = 'spiffe/broker/broker.proto';
export const BROKER_SERVICE = 'spiffe.broker.API';
/** The method names of `spiffe.broker.API`. */
export const BROKER_METHOD = Object.freeze({
  subscribeToX509Svid: 'SubscribeToX509SVID',
  subscribeToX509Bundles: 'SubscribeToX509Bundles',
  fetchJwtSvid: 'FetchJWTSVID',
  subscribeToJwtBundles: 'SubscribeToJWTBundles',
});
/** The call metadata every Broker API request must carry, with value `BROKER_HEADER_VALUE`. */
export const BROKER_HEADER = 'broker.spiffe.io';
export const BROKER_HEADER_VALUE = 'true';

/**
 * Workload reference types, by full protobuf name. The final SPIFFE Broker API defines them in
 * `spiffe.broker` (spiffe/broker/broker.proto); go-spiffe publishes the same messages, fields and
 * numbers in `spiffe.reference` (spiffe/reference/reference.proto), and ztunnel's Broker API client
 * (istio/ztunnel#1936) packs its references with those type URLs. Both are accepted.
 */
export const KUBERNETES_REFERENCE_TYPE = 'spiffe.broker.KubernetesObjectReference';
export const PID_REFERENCE_TYPE = 'spiffe.broker.WorkloadPIDReference';
/** The `spiffe.reference` package's .proto file, relative to `proto/`. */
export const REFERENCE_PROTO = 'spiffe/reference/reference.proto';
export const REFERENCE_PACKAGE_KUBERNETES_TYPE = 'spiffe.reference.KubernetesObjectReference';
export const REFERENCE_PACKAGE_PID_TYPE = 'spiffe.reference.WorkloadPIDReference';
export const KUBERNETES_REFERENCE_TYPE_URL = typeUrlOf(KUBERNETES_REFERENCE_TYPE);
export const PID_REFERENCE_TYPE_URL = typeUrlOf(PID_REFERENCE_TYPE);

/** The two kinds of workload reference the broker serves (each with its own allow-list of callers). */
export type ReferenceKind = 'kubernetes' | 'pid';
export const REFERENCE_KINDS: readonly ReferenceKind[] = Object.freeze(['kubernetes', 'pid']);

/** An accepted reference type: its kind, and where its message type is defined. */
export interface ReferenceTypeInfo {
  readonly kind: ReferenceKind;
  readonly proto: string;
  readonly type: string;
}

/** Every accepted type URL (`Any.type_url`) and what it names. */
export const REFERENCE_TYPES: Readonly<Record<string, ReferenceTypeInfo>> = Object.freeze({
  [KUBERNETES_REFERENCE_TYPE_URL]: { kind: 'kubernetes', proto: BROKER_PROTO, type: KUBERNETES_REFERENCE_TYPE },
  [typeUrlOf(REFERENCE_PACKAGE_KUBERNETES_TYPE)]: { kind: 'kubernetes', proto: REFERENCE_PROTO, type: REFERENCE_PACKAGE_KUBERNETES_TYPE },
  [PID_REFERENCE_TYPE_URL]: { kind: 'pid', proto: BROKER_PROTO, type: PID_REFERENCE_TYPE },
  [typeUrlOf(REFERENCE_PACKAGE_PID_TYPE)]: { kind: 'pid', proto: REFERENCE_PROTO, type: REFERENCE_PACKAGE_PID_TYPE },
});
/** Every type URL read as a KubernetesObjectReference (same fields and numbers). */
export const KUBERNETES_REFERENCE_TYPE_URLS: readonly string[] = Object.freeze(Object.keys(REFERENCE_TYPES).filter((u) => REFERENCE_TYPES[u]!.kind === 'kubernetes'));
/** Every type URL read as a WorkloadPIDReference. */
export const PID_REFERENCE_TYPE_URLS: readonly string[] = Object.freeze(Object.keys(REFERENCE_TYPES).filter((u) => REFERENCE_TYPES[u]!.kind === 'pid'));
/** `KubernetesObjectType` of a pod: plural `pods` in the core group (named `core`). */
export const KUBERNETES_POD_TYPE = Object.freeze({ plural: 'pods', group: 'core' });

/** The ErrorInfo domain of the reasons the Broker API standard defines. */
export const SPIFFE_ERROR_DOMAIN = 'spiffe.io';
/** The standard's ErrorInfo reasons (SPIFFE Broker API, 4.8). */
export const SPIFFE_BROKER_REASON = Object.freeze({
  workloadReferenceInvalid: 'WORKLOAD_REFERENCE_INVALID',
  workloadNotFound: 'WORKLOAD_NOT_FOUND',
  workloadNotEntitled: 'WORKLOAD_NOT_ENTITLED',
});
export type SpiffeBrokerReason = (typeof SPIFFE_BROKER_REASON)[keyof typeof SPIFFE_BROKER_REASON];

export interface KubernetesObjectType {
  readonly plural?: string;
  readonly group?: string;
}

export interface KubernetesObjectKey {
  readonly namespace?: string;
  readonly name?: string;
}

/** A workload by process id (positive; in the broker's PID namespace). */
export interface WorkloadPIDReference {
  readonly pid?: number;
}

/** A Kubernetes object by key, by UID, or both. */
export interface KubernetesObjectReference {
  readonly type?: KubernetesObjectType | null;
  readonly key?: KubernetesObjectKey | null;
  readonly uid?: string;
}

export interface WorkloadReference {
  readonly reference?: ProtoAny | null;
}

/** What every Broker API request carries (the X.509 and JWT-bundle requests are only this). */
export interface WorkloadRequest {
  readonly reference?: WorkloadReference | null;
}

export type SubscribeToX509SVIDRequest = WorkloadRequest;
export type SubscribeToX509BundlesRequest = WorkloadRequest;
export type SubscribeToJWTBundlesRequest = WorkloadRequest;

export interface FetchJWTSVIDRequest extends WorkloadRequest {
  readonly audience?: readonly string[];
  readonly spiffe_id?: string;
}

/** `X509SVID`, `X509SVIDResponse` and `X509BundlesResponse` are the Workload API's messages, field for field. */
export type { X509SVID } from './spiffe-x509.js';
export type SubscribeToX509SVIDResponse = X509SVIDResponse;
export type SubscribeToX509BundlesResponse = X509BundlesResponse;

export interface JWTSVID {
  readonly spiffe_id: string;
  readonly svid: string;
  readonly hint: string;
}

export interface FetchJWTSVIDResponse {
  readonly svids: readonly JWTSVID[];
}

export interface SubscribeToJWTBundlesResponse {
  readonly bundles: Readonly<Record<string, Buffer>>;
}
