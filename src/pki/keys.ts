/**
 * Keys as node:crypto `KeyObject`s, parsed once. Generation uses the asynchronous
 * `crypto.generateKeyPair` and exports PKCS#8/SPKI DER only — never
 * `generateKeyPairSync('ec')` followed by a JWK export, which hangs on Node 20.20.2.
 *
 * Supported: ECDSA P-256 (the leaf default), P-384, RSA 2048/3072/4096 (CA keys and CSRs).
 */
import { createPrivateKey, createPublicKey, generateKeyPair as generateNodeKeyPair, type KeyObject } from 'node:crypto';
import { Secret } from '../core/secret.js';
import { PkiError } from './errors.js';
import { parsePemOne, pemEncode } from './pem.js';

export type KeySpec =
  | { readonly kind: 'ec'; readonly curve: 'P-256' | 'P-384' }
  | { readonly kind: 'rsa'; readonly bits: 2048 | 3072 | 4096 };

export const P256: KeySpec = Object.freeze({ kind: 'ec', curve: 'P-256' });

export interface KeyPair {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
}

const NODE_CURVE = { 'P-256': 'prime256v1', 'P-384': 'secp384r1' } as const;

/** The KeySpec of a private or public key; anything else is ERR_PKI_KEY_UNSUPPORTED. */
export function keySpecOf(key: KeyObject): KeySpec {
  const type = key.asymmetricKeyType;
  const details = key.asymmetricKeyDetails ?? {};
  if (type === 'ec') {
    if (details.namedCurve === 'prime256v1') return { kind: 'ec', curve: 'P-256' };
    if (details.namedCurve === 'secp384r1') return { kind: 'ec', curve: 'P-384' };
    throw new PkiError('ERR_PKI_KEY_UNSUPPORTED', `unsupported EC curve ${String(details.namedCurve)} (want P-256 or P-384)`);
  }
  if (type === 'rsa') {
    const bits = details.modulusLength;
    if (bits === 2048 || bits === 3072 || bits === 4096) return { kind: 'rsa', bits };
    throw new PkiError('ERR_PKI_KEY_UNSUPPORTED', `unsupported RSA key size ${String(bits)} (want 2048, 3072 or 4096)`);
  }
  throw new PkiError('ERR_PKI_KEY_UNSUPPORTED', `unsupported key type ${String(type)} (want EC or RSA)`);
}

/** Generates a key pair (default ECDSA P-256) without blocking the event loop. */
export function generateKeyPair(spec: KeySpec = P256): Promise<KeyPair> {
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, publicKey: KeyObject, privateKey: KeyObject) => {
      if (err) reject(new PkiError('ERR_PKI_KEY_INVALID', 'key generation failed', err));
      else resolve({ privateKey, publicKey });
    };
    if (spec.kind === 'ec') generateNodeKeyPair('ec', { namedCurve: NODE_CURVE[spec.curve] }, done);
    else generateNodeKeyPair('rsa', { modulusLength: spec.bits, publicExponent: 0x10001 }, done);
  });
}

/** PKCS#8 DER of a private key, wrapped so it cannot reach a log by accident. */
export function exportPkcs8Der(privateKey: KeyObject): Secret<Buffer> {
  return new Secret(privateKey.export({ type: 'pkcs8', format: 'der' }));
}

/** PKCS#8 PEM (`PRIVATE KEY`) of a private key, wrapped. */
export function exportPkcs8Pem(privateKey: KeyObject): Secret<string> {
  return new Secret(pemEncode('PRIVATE KEY', privateKey.export({ type: 'pkcs8', format: 'der' })));
}

/** SubjectPublicKeyInfo DER of a public (or private) key. */
export function exportSpkiDer(key: KeyObject): Buffer {
  const pub = key.type === 'private' ? createPublicKey(key) : key;
  return pub.export({ type: 'spki', format: 'der' });
}

/**
 * Parses a private key PEM (`PRIVATE KEY`, `EC PRIVATE KEY` or `RSA PRIVATE KEY`) into a
 * KeyObject and checks it is a supported kind. Errors never include the key bytes.
 */
export function parsePrivateKeyPem(pem: string | Uint8Array): KeyObject {
  const block = parsePemOne(pem, ['PRIVATE KEY', 'EC PRIVATE KEY', 'RSA PRIVATE KEY']);
  const type = block.type === 'PRIVATE KEY' ? 'pkcs8' : block.type === 'EC PRIVATE KEY' ? 'sec1' : 'pkcs1';
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: block.der, format: 'der', type });
  } catch (err) {
    throw new PkiError('ERR_PKI_KEY_INVALID', `private key (${block.type}) cannot be parsed`, err);
  }
  keySpecOf(key);
  return key;
}

/** Parses PKCS#8 DER into a KeyObject. */
export function parsePkcs8Der(der: Uint8Array): KeyObject {
  try {
    const key = createPrivateKey({ key: Buffer.from(der), format: 'der', type: 'pkcs8' });
    keySpecOf(key);
    return key;
  } catch (err) {
    if (err instanceof PkiError) throw err;
    throw new PkiError('ERR_PKI_KEY_INVALID', 'PKCS#8 private key cannot be parsed', err);
  }
}

/** True when `privateKey` is the private half of `publicKeyOrSpki`. */
export function keyMatches(privateKey: KeyObject, publicKeyOrSpki: KeyObject | Uint8Array): boolean {
  const spki =
    publicKeyOrSpki instanceof Uint8Array ? Buffer.from(publicKeyOrSpki) : exportSpkiDer(publicKeyOrSpki);
  return exportSpkiDer(privateKey).equals(spki);
}
