/**
 * The cluster's service-account token issuer: an ES256 key made at start, JWTs with the claim
 * set the real kube-apiserver issues for TokenRequest, verification against the cluster's own
 * JWKS, and the OIDC discovery documents. Tokens are never logged.
 */
import { randomUUID } from 'node:crypto';
import { SignJWT, calculateJwkThumbprint, exportJWK, generateKeyPair, jwtVerify, type JWK, type CryptoKey } from 'jose';
import type { Clock } from '../core/clock.js';
import { errCode } from '../core/errors.js';

export interface BoundRef {
  readonly name: string;
  readonly uid: string;
}

export interface ServiceAccountClaims {
  readonly iss: string;
  readonly sub: string;
  readonly aud: string[];
  readonly exp: number;
  readonly iat: number;
  readonly nbf: number;
  readonly jti: string;
  readonly 'kubernetes.io': {
    readonly namespace: string;
    readonly serviceaccount: BoundRef;
    readonly pod?: BoundRef;
    readonly secret?: BoundRef;
    readonly node?: BoundRef;
    readonly warnafter?: number;
  };
}

export interface IssueOptions {
  readonly namespace: string;
  readonly serviceAccount: BoundRef;
  readonly audiences: readonly string[];
  readonly expirationSeconds: number;
  readonly pod?: BoundRef;
  readonly secret?: BoundRef;
  readonly node?: BoundRef;
}

export class TokenIssuer {
  readonly issuer: string;
  readonly #clock: Clock;
  readonly #privateKey: CryptoKey;
  readonly #publicKey: CryptoKey;
  readonly #jwk: JWK;

  private constructor(options: { issuer: string; clock: Clock; privateKey: CryptoKey; publicKey: CryptoKey; jwk: JWK }) {
    this.issuer = options.issuer;
    this.#clock = options.clock;
    this.#privateKey = options.privateKey;
    this.#publicKey = options.publicKey;
    this.#jwk = options.jwk;
  }

  static async create(options: { issuer: string; clock: Clock }): Promise<TokenIssuer> {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    const pub = await exportJWK(publicKey);
    const kid = await calculateJwkThumbprint(pub);
    const jwk: JWK = { use: 'sig', kty: pub.kty, kid, crv: pub.crv, alg: 'ES256', x: pub.x, y: pub.y };
    return new TokenIssuer({ issuer: options.issuer, clock: options.clock, privateKey, publicKey, jwk });
  }

  get keyId(): string {
    return this.#jwk.kid!;
  }

  jwks(): { keys: JWK[] } {
    return { keys: [{ ...this.#jwk }] };
  }

  openIdConfiguration(jwksUri: string): Record<string, unknown> {
    return {
      issuer: this.issuer,
      jwks_uri: jwksUri,
      response_types_supported: ['id_token'],
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['ES256'],
    };
  }

  async issue(options: IssueOptions): Promise<{ token: string; claims: ServiceAccountClaims }> {
    const now = Math.floor(this.#clock.now() / 1000);
    const claims: ServiceAccountClaims = {
      iss: this.issuer,
      sub: `system:serviceaccount:${options.namespace}:${options.serviceAccount.name}`,
      aud: [...options.audiences],
      exp: now + options.expirationSeconds,
      iat: now,
      nbf: now,
      jti: randomUUID(),
      'kubernetes.io': {
        namespace: options.namespace,
        ...(options.node ? { node: { name: options.node.name, uid: options.node.uid } } : {}),
        ...(options.pod ? { pod: { name: options.pod.name, uid: options.pod.uid } } : {}),
        ...(options.secret ? { secret: { name: options.secret.name, uid: options.secret.uid } } : {}),
        serviceaccount: { name: options.serviceAccount.name, uid: options.serviceAccount.uid },
      },
    };
    const token = await new SignJWT({ ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: this.keyId })
      .sign(this.#privateKey);
    return { token, claims };
  }

  /**
   * Checks signature, issuer and time window. Returns the claims or a short reason (never the
   * token). Audience and bound-object checks belong to the caller, who knows the context.
   */
  async verify(token: string): Promise<{ ok: true; claims: ServiceAccountClaims } | { ok: false; reason: string }> {
    if (token.split('.').length !== 3) return { ok: false, reason: 'not a JWT' };
    try {
      const { payload } = await jwtVerify(token, this.#publicKey, {
        issuer: this.issuer,
        algorithms: ['ES256'],
        currentDate: new Date(this.#clock.now()),
        requiredClaims: ['exp', 'iat', 'sub'],
      });
      const k = payload['kubernetes.io'] as ServiceAccountClaims['kubernetes.io'] | undefined;
      if (!k || typeof k.namespace !== 'string' || !k.serviceaccount) return { ok: false, reason: 'missing kubernetes.io claims' };
      const aud = typeof payload.aud === 'string' ? [payload.aud] : (payload.aud ?? []);
      const { iss, sub, exp, iat, nbf, jti } = payload;
      // Every token this issuer signs has them all (jwtVerify checked iss, sub, exp and iat).
      if (iss === undefined || sub === undefined || exp === undefined || iat === undefined || nbf === undefined || jti === undefined) {
        return { ok: false, reason: 'invalid token claims' };
      }
      return { ok: true, claims: { ...payload, iss, sub, aud, exp, iat, nbf, jti, 'kubernetes.io': k } };
    } catch (err) {
      const code = errCode(err);
      if (code === 'ERR_JWT_EXPIRED') return { ok: false, reason: 'service account token has expired' };
      if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED') return { ok: false, reason: 'invalid token claims' };
      return { ok: false, reason: 'invalid bearer token' };
    }
  }
}
