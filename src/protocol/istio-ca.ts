/**
 * Istio's CA protocol (`istio.v1.auth.IstioCertificateService`, proto/istio/v1/auth/ca.proto),
 * as istiod serves it and ztunnel's `identity/caclient.rs` calls it: the one place its names,
 * call metadata and message shapes are written. The broker's CA client, the CA's certificate
 * service and its lean http2 transport all take them from here.
 *
 * A call: `CreateCertificate(IstioCertificateRequest)` with `authorization: Bearer <token>` and
 * `clusterid: <cluster>` (absent: the CA's default cluster) as call metadata; a node agent asking
 * for another workload's identity puts that SPIFFE ID under `ImpersonatedIdentity` in the
 * request's `metadata` Struct. The answer's `cert_chain` is leaf, intermediates, root bundle last.
 */
import type { ProtoStruct } from './protobuf-types.js';

/** The .proto file, relative to `proto/`. */
export const CA_PROTO = 'istio/v1/auth/ca.proto';
export const CA_SERVICE = 'istio.v1.auth.IstioCertificateService';
export const CREATE_CERTIFICATE_METHOD = 'CreateCertificate';
/** The HTTP/2 `:path` of CreateCertificate. */
export const CREATE_CERTIFICATE_PATH = `/${CA_SERVICE}/${CREATE_CERTIFICATE_METHOD}`;
export const CERTIFICATE_REQUEST_TYPE = 'istio.v1.auth.IstioCertificateRequest';
export const CERTIFICATE_RESPONSE_TYPE = 'istio.v1.auth.IstioCertificateResponse';

/** Call metadata carrying the caller's bearer token. */
export const AUTHORIZATION_METADATA = 'authorization';
/** Call metadata naming the cluster whose authenticator checks the token. */
export const CLUSTER_ID_METADATA = 'clusterid';
/** The cluster id Istio assumes when none is configured or sent. */
export const DEFAULT_CLUSTER_ID = 'Kubernetes';
/** The token audience Istio's CA accepts by default (and node agents request). */
export const CA_TOKEN_AUDIENCE = 'istio-ca';
/** Key in the request's `metadata` Struct: the SPIFFE ID a trusted node agent asks for. */
export const IMPERSONATED_IDENTITY_KEY = 'ImpersonatedIdentity';
/**
 * certbroker's extension, a key in the request's `metadata` Struct: DNS names and IP literals
 * (one string, comma-separated) a trusted node agent asks to have on its *own* SVID next to the
 * URI SAN, so the certificate can also serve TLS on the node (the broker's Istio CA front, which
 * released ztunnel dials as `localhost:15012`). certbroker's CA grants only names on its
 * allow-list; istiod ignores the key, and the broker refuses a leaf without the names.
 */
export const SERVING_NAMES_KEY = 'certbroker.io/serving-names';
/**
 * The ConfigMap istiod writes into every namespace with the mesh root bundle (pilot's
 * `CACertNamespaceConfigMap`), its data key, and the label it carries (`istio.io/config=true`).
 * Sidecars, ztunnel and certbroker's broker mount it as `root-cert.pem`.
 */
export const ROOT_CERT_CONFIGMAP = 'istio-ca-root-cert';
export const ROOT_CERT_CONFIGMAP_KEY = 'root-cert.pem';
export const ISTIO_CONFIG_LABEL = 'istio.io/config';

export interface IstioCertificateRequest {
  /** PEM PKCS#10 CSR. */
  readonly csr?: string;
  /** Requested lifetime in seconds (int64; 0 or absent = the CA's default). */
  readonly validity_duration?: number | string;
  readonly metadata?: ProtoStruct | null;
}

export interface IstioCertificateResponse {
  /** Leaf, intermediates (one per element), root bundle last; PEM. */
  readonly cert_chain: readonly string[];
}

/** The `authorization` metadata value for a token. */
export function bearerAuthorization(token: string): string {
  return `Bearer ${token}`;
}

/** The token of an `authorization: Bearer <token>` value (scheme case-insensitive); undefined otherwise. */
export function bearerTokenOf(value: string): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(value);
  return m?.[1] || undefined;
}

/**
 * The call metadata a CreateCertificate handler reads: grpc-js `Metadata` satisfies it (the CA's
 * http2 transport adapts its header object without building a `Metadata` per call).
 */
export interface CallMetadata {
  get(key: string): ReadonlyArray<string | Buffer>;
}

/** The first value of `key` in the call metadata, as a string; undefined when absent. */
export function callMetadataString(md: CallMetadata, key: string): string | undefined {
  const v = md.get(key)[0];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : v.toString('utf8');
}

/** The token of the first `authorization` value that is `Bearer <token>`; undefined when none is. */
export function callBearerToken(md: CallMetadata): string | undefined {
  for (const v of md.get(AUTHORIZATION_METADATA)) {
    const token = bearerTokenOf(typeof v === 'string' ? v : v.toString('utf8'));
    if (token) return token;
  }
  return undefined;
}
