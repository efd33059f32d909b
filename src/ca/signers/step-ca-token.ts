/**
 * step-ca's one-time tokens for its JWK provisioner: a JWT signed with the provisioner's private
 * key that `POST /1.0/sign` takes as `ott`. What step-ca 0.19 checks (authority/provisioner/jwk.go,
 * collection.go): the provisioner is found by `iss:kid` (its name and the `kid` of its key in
 * ca.json), the signature verifies with that key, `iss` is the name, `aud` is one of the CA's sign
 * audiences (`https://<dnsName>/1.0/sign`, the port ignored), `nbf`/`exp` hold (one minute of
 * leeway), `sub` is not empty, and `jti` is used once. `sans` (SPIFFE ID first, then any serving
 * names) become the leaf's SANs through the provisioner's template; the CSR's own SANs, when it has
 * any, must equal them.
 *
 * The key file is the private JWK as JSON, or (with a password) the JWE `step crypto jwk create`
 * writes (PBES2). Its `kid` is used when it has one (step sets it to the RFC 7638 SHA-256
 * thumbprint); a key without one gets the thumbprint, which is then what ca.json must name.
 */
import { createPrivateKey, randomBytes, webcrypto, type JsonWebKey } from 'node:crypto';
import { calculateJwkThumbprint, compactDecrypt, SignJWT, type JWK } from 'jose';
import { CaError } from '../errors.js';

/** How long a token is valid: step-ca refuses a replayed `jti` anyway, the window only bounds clock skew. */
export const STEP_CA_TOKEN_TTL_SECONDS = 300;

export interface ProvisionerKey {
  /** The provisioner's name (`iss`). */
  readonly name: string;
  /** The `kid` header: the provisioner key's `kid` in ca.json. */
  readonly kid: string;
  readonly alg: string;
  /**
   * Imported once as a non-extractable WebCrypto key: jose 6 signs with WebCrypto and would
   * convert a KeyObject on every token (~2-3 ms each, more than step-ca's round trip).
   */
  readonly key: webcrypto.CryptoKey;
}

/** WebCrypto import parameters for a JWS algorithm. */
function importParams(alg: string): webcrypto.RsaHashedImportParams | webcrypto.EcKeyImportParams | webcrypto.Algorithm {
  if (alg.startsWith('ES')) return { name: 'ECDSA', namedCurve: ({ ES256: 'P-256', ES384: 'P-384', ES512: 'P-521' } as Record<string, string>)[alg] ?? 'P-256' };
  if (alg.startsWith('RS')) return { name: 'RSASSA-PKCS1-v1_5', hash: `SHA-${alg.slice(2)}` };
  if (alg.startsWith('PS')) return { name: 'RSA-PSS', hash: `SHA-${alg.slice(2)}` };
  return { name: 'Ed25519' };
}

/** What `step crypto jwk create` encrypts keys with (PBES2, 100 000 or more iterations). */
const PBES2_ALGORITHMS = ['PBES2-HS256+A128KW', 'PBES2-HS384+A192KW', 'PBES2-HS512+A256KW'];
const MAX_PBES2_COUNT = 1_000_000;

const ALG_FOR_CURVE: Readonly<Record<string, string>> = { 'P-256': 'ES256', 'P-384': 'ES384', 'P-521': 'ES512', Ed25519: 'EdDSA' };

function keyProblem(why: string, cause?: unknown): CaError {
  return new CaError('ERR_CA_SIGNER_MATERIAL_INVALID', `step-ca provisioner key: ${why}`, { status: 'failed-precondition', cause });
}

function algFor(jwk: JWK): string {
  if (typeof jwk.alg === 'string' && jwk.alg !== '') return jwk.alg;
  if (jwk.kty === 'RSA') return 'RS256';
  const alg = typeof jwk.crv === 'string' ? ALG_FOR_CURVE[jwk.crv] : undefined;
  if (alg === undefined) throw keyProblem(`no signing algorithm for a ${String(jwk.kty)} key on curve ${String(jwk.crv)}`);
  return alg;
}

/**
 * Reads the provisioner's private key from the key file's text: JWK JSON, or a compact JWE
 * decrypted with `password`. Throws ERR_CA_SIGNER_MATERIAL_INVALID naming what is wrong (never
 * the key or the password).
 */
export async function readProvisionerKey(name: string, fileText: string, password?: Uint8Array): Promise<ProvisionerKey> {
  const text = fileText.trim();
  let json = text;
  if (!text.startsWith('{')) {
    if (password === undefined) throw keyProblem('the key file is not JSON (an encrypted key needs --provisioner-key-password-file)');
    try {
      json = new TextDecoder().decode((await compactDecrypt(text, password, { keyManagementAlgorithms: PBES2_ALGORITHMS, maxPBES2Count: MAX_PBES2_COUNT })).plaintext);
    } catch (err) {
      throw keyProblem('the key file cannot be decrypted with the password given', err);
    }
  }
  let jwk: JWK;
  try {
    const parsed: unknown = JSON.parse(json);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not a JSON object');
    jwk = parsed as JWK;
  } catch (err) {
    throw keyProblem('the key is not a JSON Web Key', err);
  }
  if (typeof jwk.d !== 'string') throw keyProblem('the key has no private part ("d"): give the provisioner\'s private JWK');
  const alg = algFor(jwk);
  let key: webcrypto.CryptoKey;
  try {
    // Through a KeyObject first: it checks the key is whole (d matches x/y) for every key type.
    const pkcs8 = createPrivateKey({ key: jwk as JsonWebKey, format: 'jwk' }).export({ type: 'pkcs8', format: 'der' });
    key = await webcrypto.subtle.importKey('pkcs8', pkcs8, importParams(alg), false, ['sign']);
  } catch (err) {
    throw keyProblem(`the key cannot be used for ${alg}`, err);
  }
  const kid = typeof jwk.kid === 'string' && jwk.kid !== '' ? jwk.kid : await calculateJwkThumbprint(jwk, 'sha256');
  return { name, kid, alg, key };
}

export interface TokenClaims {
  /** The CA's sign endpoint, `<url>/1.0/sign`. */
  readonly audience: string;
  /** The SPIFFE ID (or, for the CA's serving certificate, its first DNS name). */
  readonly subject: string;
  readonly sans: readonly string[];
  readonly nowMs: number;
}

/** A fresh one-time token for one sign request. */
export async function signToken(key: ProvisionerKey, claims: TokenClaims): Promise<string> {
  const now = Math.floor(claims.nowMs / 1000);
  return new SignJWT({ sans: [...claims.sans] })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
    .setIssuer(key.name)
    .setAudience(claims.audience)
    .setSubject(claims.subject)
    .setIssuedAt(now)
    .setNotBefore(now)
    .setExpirationTime(now + STEP_CA_TOKEN_TTL_SECONDS)
    .setJti(randomBytes(16).toString('hex'))
    .sign(key.key);
}
