/**
 * The CA's error codes. Authentication and authorization failures all answer UNAUTHENTICATED
 * with a generic message (as istiod does); their precise code goes to the log and to the
 * `reason` label of the request counter, never to the caller. The one exception is
 * ERR_CA_AUTHN_BACKEND: no verdict was reached (TokenReview, OIDC discovery or JWKS unreachable,
 * 5xx, 429, timed out), so it answers UNAVAILABLE ("authentication backend unavailable"),
 * which callers retry, and is never remembered as a refusal.
 */
import { CertbrokerError, type ErrorStatus } from '../core/errors.js';

/** Authentication failures (who is calling). */
export type CaAuthnCode =
  | 'ERR_CA_NO_TOKEN'
  | 'ERR_CA_UNKNOWN_CLUSTER'
  | 'ERR_CA_TOKEN_INVALID'
  /** Not a JWT at all (not three base64url segments with a JOSE header, or too long): refused before any TokenReview. */
  | 'ERR_CA_TOKEN_MALFORMED'
  | 'ERR_CA_TOKEN_EXPIRED'
  | 'ERR_CA_TOKEN_AUDIENCE'
  | 'ERR_CA_TOKEN_NOT_SERVICE_ACCOUNT'
  /** No verdict: the authentication backend failed or did not answer (status unavailable, not unauthenticated). */
  | 'ERR_CA_AUTHN_BACKEND';

/** Authorization failures (may this caller have this identity). */
export type CaAuthzCode =
  | 'ERR_CA_NODE_NOT_TRUSTED'
  | 'ERR_CA_IDENTITY_INVALID'
  | 'ERR_CA_CALLER_NOT_POD_BOUND'
  | 'ERR_CA_CALLER_POD_MISSING'
  | 'ERR_CA_CALLER_POD_UID_MISMATCH'
  | 'ERR_CA_CALLER_POD_SA_MISMATCH'
  | 'ERR_CA_NO_POD_ON_NODE'
  | 'ERR_CA_POD_INDEX_NOT_SYNCED'
  /** Serving names asked together with ImpersonatedIdentity (they are for the caller's own SVID only). */
  | 'ERR_CA_SERVING_NAMES_IMPERSONATED'
  /** A serving name that is not on the CA's allow-list (CA_GRANTABLE_SERVING_NAMES). */
  | 'ERR_CA_SERVING_NAME_NOT_ALLOWED';

export type CaErrorCode =
  | CaAuthnCode
  | CaAuthzCode
  /** What the caller sees for every authn/authz failure. */
  | 'ERR_CA_UNAUTHENTICATED'
  /** The request message is not a parsable IstioCertificateRequest. */
  | 'ERR_CA_REQUEST_MALFORMED'
  | 'ERR_CA_CSR_INVALID'
  | 'ERR_CA_TTL_INVALID'
  | 'ERR_CA_TTL_OVER_MAX'
  | 'ERR_CA_METADATA_INVALID'
  | 'ERR_CA_SIGNER_NOT_READY'
  | 'ERR_CA_SIGNING_FAILED'
  | 'ERR_CA_SIGNER_MATERIAL_INVALID'
  /** kubernetes-csr backend: the CSR's SANs are not exactly the identity the caller was authorized for. */
  | 'ERR_CA_CSR_IDENTITY_MISMATCH'
  /** kubernetes-csr backend: serving names asked of a signer that issues SPIFFE-only leaves. */
  | 'ERR_CA_SERVING_NAMES_UNSUPPORTED'
  /** kubernetes-csr backend: an approver denied the CertificateSigningRequest. */
  | 'ERR_CA_CSR_DENIED'
  /** kubernetes-csr backend: the signer refused the request (Failed condition). */
  | 'ERR_CA_CSR_FAILED'
  /** kubernetes-csr backend: no certificate (nor a denial) within the deadline. */
  | 'ERR_CA_CSR_TIMEOUT'
  /** The caller stopped waiting (deadline, cancel) and the signer gave its outside call up. */
  | 'ERR_CA_CALL_CANCELLED'
  /** kubernetes-csr backend: the API server refused or did not answer a CSR call (create, approve). */
  | 'ERR_CA_CSR_API'
  /** kubernetes-csr backend: the issued certificate is not a valid X509-SVID for the request, or does not chain to the configured roots. */
  | 'ERR_CA_CSR_BAD_CERTIFICATE'
  /** A `rotate-root` step that does not apply to the stored CA's phase, or a Secret that moved meanwhile. */
  | 'ERR_CA_ROTATION_STEP'
  | StepCaErrorCode
  | UpstreamCode
  | ModuleCode;

/**
 * step-ca's answers (signers/step-ca-client.ts): 400 -> BAD_REQUEST (invalid-argument), 401 ->
 * UNAUTHORIZED (the CA's provisioner token refused: failed-precondition, never UNAUTHENTICATED,
 * which would blame the caller), 403 -> REFUSED (its policy refused this leaf: permission-denied),
 * 5xx and other statuses -> UNAVAILABLE, no connection or TLS -> UNREACHABLE, no answer within the
 * deadline -> TIMEOUT (all three unavailable), a 2xx that is not a SignResponse -> BAD_ANSWER.
 */
export type StepCaErrorCode =
  | 'ERR_CA_STEP_CA_BAD_REQUEST'
  | 'ERR_CA_STEP_CA_UNAUTHORIZED'
  | 'ERR_CA_STEP_CA_REFUSED'
  | 'ERR_CA_STEP_CA_UNAVAILABLE'
  | 'ERR_CA_STEP_CA_UNREACHABLE'
  | 'ERR_CA_STEP_CA_TIMEOUT'
  | 'ERR_CA_STEP_CA_BAD_ANSWER';


/** The `istio-upstream` signer (registration-authority mode): what the upstream CA did. */
export type UpstreamCode =
  /** The upstream answered UNAUTHENTICATED, PERMISSION_DENIED or INVALID_ARGUMENT: relayed with that status. */
  | 'ERR_CA_UPSTREAM_REFUSED'
  /** The upstream could not be reached, or failed (UNAVAILABLE, INTERNAL, a transport error, ...). */
  | 'ERR_CA_UPSTREAM_UNAVAILABLE'
  /** The upstream did not answer within CA_SIGNER_TIMEOUT_SECONDS. */
  | 'ERR_CA_UPSTREAM_TIMEOUT'
  /** The upstream's certificate is not for the asked identity and key, or does not chain to the upstream roots. */
  | 'ERR_CA_UPSTREAM_BAD_RESPONSE'
  /** The RA's own credential (the upstream token file) cannot be read, or is empty. */
  | 'ERR_CA_UPSTREAM_CREDENTIALS';

/** The `module:` signer: what the integrator's module did. */
export type ModuleCode =
  /** The module could not be imported, or exports no usable signer. */
  | 'ERR_CA_MODULE_LOAD'
  /** The module refused the request (it threw a `SignerRefusal`). */
  | 'ERR_CA_MODULE_REFUSED'
  /** The module threw anything else (an outage, a bug). */
  | 'ERR_CA_MODULE_FAILED'
  /** The module did not answer within CA_SIGNER_TIMEOUT_SECONDS (its AbortSignal fired). */
  | 'ERR_CA_MODULE_TIMEOUT'
  /** The module's chain is not an X509-SVID for the asked identity and key, or does not chain to its roots. */
  | 'ERR_CA_MODULE_BAD_RESULT';

export class CaError extends CertbrokerError<CaErrorCode> {}

const AUTH_STATUS: ErrorStatus = 'unauthenticated';

/** What a caller is told when the authentication backend could not decide (ERR_CA_AUTHN_BACKEND). */
const AUTHN_BACKEND_PUBLIC_MESSAGE = 'authentication backend unavailable';

/**
 * An authentication failure: status unauthenticated (a verdict), except ERR_CA_AUTHN_BACKEND,
 * which is an outage of the backend and answers UNAVAILABLE with a generic message.
 */
export function authnError(code: CaAuthnCode, message: string, cause?: unknown): CaError {
  if (code === 'ERR_CA_AUTHN_BACKEND') return new CaError(code, message, { status: 'unavailable', publicMessage: AUTHN_BACKEND_PUBLIC_MESSAGE, cause });
  return new CaError(code, message, { status: AUTH_STATUS, cause });
}

export function authzError(code: CaAuthzCode, message: string): CaError {
  return new CaError(code, message, { status: AUTH_STATUS });
}

/** Every UNAUTHENTICATED error leaves the server as this one code, with the generic message. */
export function publicAuthError(): CaError {
  return new CaError('ERR_CA_UNAUTHENTICATED', 'authentication failed', { status: AUTH_STATUS });
}

/** The caller stopped waiting (its deadline passed, it cancelled) and the signer gave up its outside call; `what` names that call. */
export function callCancelled(what: string, cause?: unknown): CaError {
  return new CaError('ERR_CA_CALL_CANCELLED', `${what}: given up, the caller stopped waiting`, { status: 'cancelled', publicMessage: 'call cancelled', cause });
}
