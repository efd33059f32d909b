/**
 * A local, cheap check that a bearer token can be a JWT (JWS compact serialization) before it
 * costs a TokenReview against the API server. Every service-account token Kubernetes issues
 * (projected, TokenRequest, legacy Secret-based) is one; a string that is not — garbage, a
 * truncated token, an unsigned `alg: none` token, something huge — is refused here with
 * ERR_CA_TOKEN_MALFORMED. Nothing here verifies anything: a well-formed forgery passes and is
 * refused by TokenReview (and then remembered by the refusal cache).
 */
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { authnError } from '../errors.js';

/** Longest token considered (Kubernetes service-account JWTs are 1–2 KB). */
export const MAX_TOKEN_BYTES = 16 * 1024;

const BASE64URL = /^[A-Za-z0-9_-]+$/u;

/**
 * Why `token` cannot be a signed JWT, or undefined when it can: three non-empty unpadded base64url
 * segments (RFC 7515 §7.1), a JOSE header that is a JSON object naming a signing `alg` (not
 * `none`), a payload that is a JSON object (jose's decoders read both; nothing is verified). The
 * reason names no part of the token.
 */
export function jwtShapeProblem(token: string): string | undefined {
  if (token.length > MAX_TOKEN_BYTES) return `longer than ${MAX_TOKEN_BYTES} bytes`;
  const segments = token.split('.');
  if (segments.length !== 3) return `${segments.length} dot-separated segment(s), a JWT has 3`;
  if (!segments.every((p) => BASE64URL.test(p))) return 'a segment that is empty or not unpadded base64url';
  let alg: unknown;
  try {
    ({ alg } = decodeProtectedHeader(token));
  } catch {
    return 'a JOSE header that is not a JSON object';
  }
  if (typeof alg !== 'string' || alg === '' || alg === 'none') return 'a JOSE header without a signing algorithm';
  try {
    decodeJwt(token);
  } catch {
    return 'a payload that is not a JSON object';
  }
  return undefined;
}

/** Throws ERR_CA_TOKEN_MALFORMED when `token` cannot be a JWT (see `jwtShapeProblem`). */
export function requireJwtShape(token: string): void {
  const problem = jwtShapeProblem(token);
  if (problem !== undefined) throw authnError('ERR_CA_TOKEN_MALFORMED', `bearer token is not a JWT: ${problem}`);
}
