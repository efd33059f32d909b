/**
 * Authentication by verifying the service-account JWT locally against the cluster's OIDC
 * discovery document and JWKS (for a CA that runs outside the cluster). Checks the signature
 * with keys from the JWKS, the issuer, the audience, `exp`/`nbf`, and the algorithm against an
 * allow-list (unsecured `alg: none` and HMAC algorithms are never accepted). A JWKS host that
 * cannot be reached or does not answer with a key set is ERR_CA_AUTHN_BACKEND (no verdict, so the
 * chain may ask the next authenticator); a token the keys refute is a definite rejection.
 */
import { errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { Clock } from '../../core/clock.js';
import { ConfigError } from '../../core/config.js';
import { errCode } from '../../core/errors.js';
import type { Secret } from '../../core/secret.js';
import { makeCaller, parseServiceAccountUser, type Caller } from '../caller.js';
import { CaError, authnError } from '../errors.js';
import { requireAudiences, type Authenticator } from './authenticator.js';
import { tokenCacheKey, type TokenCache } from './token-cache.js';
import { requireJwtShape } from './token-shape.js';

/** Asymmetric JWS algorithms Kubernetes may sign service-account tokens with. */
export const SUPPORTED_JWT_ALGORITHMS: readonly string[] = ['RS256', 'RS384', 'RS512', 'ES256', 'ES384', 'ES512', 'PS256', 'PS384', 'PS512', 'EdDSA'];
export const DEFAULT_JWT_ALGORITHMS: readonly string[] = ['RS256', 'ES256'];

/**
 * What is wrong with an algorithm allow-list (none when it is usable): it must name at least one
 * algorithm, each from SUPPORTED_JWT_ALGORITHMS (names are case-sensitive, as in a JWS header).
 * `name` says where the list came from (an env var, an authenticator).
 */
export function jwtAlgorithmProblems(algorithms: readonly string[], name: string): string[] {
  if (algorithms.length === 0) return [`${name} names no JWT algorithm`];
  return algorithms
    .filter((alg) => !SUPPORTED_JWT_ALGORITHMS.includes(alg))
    .map((alg) => `${name} entry ${JSON.stringify(alg)} is not an allowed JWT algorithm (allowed: ${SUPPORTED_JWT_ALGORITHMS.join(',')}; HMAC and none never are)`);
}

export interface JwtAuthenticatorOptions {
  readonly clusterId: string;
  readonly issuer: string;
  readonly audiences: readonly string[];
  readonly algorithms: readonly string[];
  /** Resolves the verification key (jose's createRemoteJWKSet result, or a lazy wrapper). */
  readonly keys: JWTVerifyGetKey;
  readonly clock: Clock;
  readonly cache: TokenCache;
  readonly clockToleranceSeconds?: number;
}

interface KubernetesClaims {
  readonly namespace?: unknown;
  readonly pod?: { readonly name?: unknown; readonly uid?: unknown };
  readonly serviceaccount?: { readonly name?: unknown };
}

export class JwtAuthenticator implements Authenticator {
  readonly kind = 'jwt' as const;
  readonly #o: JwtAuthenticatorOptions;

  constructor(options: JwtAuthenticatorOptions) {
    // jose would refuse every token for `audience: []`; refusing to start is clearer.
    requireAudiences(options.audiences, `JWT authenticator for cluster ${options.clusterId}`);
    const problems = jwtAlgorithmProblems(options.algorithms, `JWT authenticator for cluster ${options.clusterId}`);
    if (problems.length > 0) throw new ConfigError(problems);
    this.#o = options;
  }

  /**
   * The verification key for a token (jose asks after the algorithm passed the allow-list).
   * Only "the key set has no (single) key for this token" is the token's fault; any other
   * failure to get a key — network error, timeout, non-200, a body that is not a JSON Web Key
   * Set, a key that cannot be imported — means the JWKS host could not answer: no verdict.
   */
  readonly #key: JWTVerifyGetKey = async (header, token) => {
    try {
      return await this.#o.keys(header, token);
    } catch (err) {
      if (err instanceof CaError) throw err;
      if (err instanceof joseErrors.JWKSNoMatchingKey || err instanceof joseErrors.JWKSMultipleMatchingKeys) {
        throw authnError('ERR_CA_TOKEN_INVALID', 'JWT key is not in the JWKS', err);
      }
      throw authnError('ERR_CA_AUTHN_BACKEND', 'JWKS could not be fetched or is not a valid key set', err);
    }
  };

  async authenticate(token: Secret<string>): Promise<Caller> {
    const key = tokenCacheKey({ clusterId: `jwt\0${this.#o.clusterId}`, token: token.reveal() });
    const cached = this.#o.cache.get(key);
    if (cached) return cached;
    requireJwtShape(token.reveal());
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token.reveal(), this.#key, {
        issuer: this.#o.issuer,
        audience: [...this.#o.audiences],
        algorithms: [...this.#o.algorithms],
        currentDate: new Date(this.#o.clock.now()),
        clockTolerance: this.#o.clockToleranceSeconds ?? 0,
        requiredClaims: ['exp', 'sub', 'iss', 'aud'],
      }));
    } catch (err) {
      throw mapJoseError(err);
    }
    const caller = callerFromClaims(payload, this.#o.clusterId);
    this.#o.cache.put(key, caller);
    return caller;
  }
}

function mapJoseError(err: unknown): CaError {
  if (err instanceof CaError) return err;
  if (err instanceof joseErrors.JWTExpired) return authnError('ERR_CA_TOKEN_EXPIRED', 'JWT has expired', err);
  if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'aud') {
    return authnError('ERR_CA_TOKEN_AUDIENCE', 'JWT audience does not match', err);
  }
  // Failures to obtain a key were classified by `#key`; what remains is about the token itself.
  const code = errCode(err);
  return authnError('ERR_CA_TOKEN_INVALID', `JWT rejected${code === undefined ? '' : ` (${code})`}`, err);
}

/** Pure: verified Kubernetes service-account claims to a Caller. */
export function callerFromClaims(payload: JWTPayload, clusterId: string): Caller {
  const sa = parseServiceAccountUser(typeof payload.sub === 'string' ? payload.sub : '');
  if (!sa) throw authnError('ERR_CA_TOKEN_NOT_SERVICE_ACCOUNT', 'JWT subject is not a service account');
  const k8s = (payload['kubernetes.io'] ?? {}) as KubernetesClaims;
  const podName = typeof k8s.pod?.name === 'string' ? k8s.pod.name : undefined;
  const podUid = typeof k8s.pod?.uid === 'string' ? k8s.pod.uid : undefined;
  return makeCaller({ namespace: sa.namespace, serviceAccount: sa.serviceAccount, podName, podUid, clusterId, authenticator: 'jwt', expiresAtMs: typeof payload.exp === 'number' ? payload.exp * 1000 : undefined });
}
