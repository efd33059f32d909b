/**
 * The SPIFFE Workload API (`SpiffeWorkloadAPI`, proto/spiffe/workload/workload.proto; the SPIFFE
 * standard's workloadapi.proto, which has no proto package): the endpoint variable, the security
 * header, service and method names, and the message shapes, for the Workload API front of the
 * broker and its clients. Constants and types only.
 */
import type { ProtoStruct } from './protobuf-types.js';

/** The .proto file, relative to `proto/`. */
export const WORKLOAD_API_PROTO = 'spiffe/workload/workload.proto';
/** The service's full name (the standard's proto has no package). */
export const WORKLOAD_API_SERVICE = 'SpiffeWorkloadAPI';
export const WORKLOAD_API_METHOD = Object.freeze({
  fetchX509Svid: 'FetchX509SVID',
  fetchX509Bundles: 'FetchX509Bundles',
  fetchJwtSvid: 'FetchJWTSVID',
  fetchJwtBundles: 'FetchJWTBundles',
  validateJwtSvid: 'ValidateJWTSVID',
});
/** The call metadata every Workload API request must carry, with value `WORKLOAD_HEADER_VALUE`. */
export const WORKLOAD_HEADER = 'workload.spiffe.io';
export const WORKLOAD_HEADER_VALUE = 'true';
/** The environment variable naming the Workload API endpoint (`unix:///path` or `tcp://ip:port`). */
export const SPIFFE_ENDPOINT_SOCKET_ENV = 'SPIFFE_ENDPOINT_SOCKET';

/** X509SVIDRequest, X509BundlesRequest and JWTBundlesRequest carry nothing today. */
export type X509SVIDRequest = Readonly<Record<never, never>>;
export type X509BundlesRequest = Readonly<Record<never, never>>;
export type JWTBundlesRequest = Readonly<Record<never, never>>;

/** The X.509 messages are the Broker API's too, field for field (`spiffe-x509.ts`). */
export type { X509BundlesResponse, X509SVID, X509SVIDResponse } from './spiffe-x509.js';

export interface JWTSVIDRequest {
  readonly audience?: readonly string[];
  readonly spiffe_id?: string;
}

export interface JWTSVID {
  readonly spiffe_id: string;
  readonly svid: string;
  readonly hint: string;
}

export interface JWTSVIDResponse {
  readonly svids: readonly JWTSVID[];
}

export interface JWTBundlesResponse {
  /** JWK set documents (JSON bytes) keyed by trust domain SPIFFE ID. */
  readonly bundles: Readonly<Record<string, Buffer>>;
}

export interface ValidateJWTSVIDRequest {
  readonly audience?: string;
  readonly svid?: string;
}

export interface ValidateJWTSVIDResponse {
  readonly spiffe_id: string;
  readonly claims: ProtoStruct | null;
}
