/**
 * The one place pki loads @peculiar/x509: reflect-metadata first, then the library, with
 * Node's WebCrypto as its provider. Also KeyObject -> CryptoKey for the reference signers.
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto, type KeyObject } from 'node:crypto';
import { webCryptoAlgorithmForKey } from './algorithms.js';
import { PkiError } from './errors.js';
import { keySpecOf } from './keys.js';

x509.cryptoProvider.set(webcrypto);

export type SigningCryptoKey = webcrypto.CryptoKey;

export { x509 };

/** A non-extractable WebCrypto signing key for a private KeyObject (via PKCS#8, in memory). */
export async function toSigningCryptoKey(privateKey: KeyObject): Promise<SigningCryptoKey> {
  const spec = keySpecOf(privateKey);
  const alg = webCryptoAlgorithmForKey(spec);
  const importAlg = spec.kind === 'ec' ? { name: alg.name, namedCurve: alg.namedCurve } : { name: alg.name, hash: alg.hash };
  return (await webcrypto.subtle.importKey(
    'pkcs8',
    privateKey.export({ type: 'pkcs8', format: 'der' }),
    importAlg,
    false,
    ['sign'],
  ));
}

/** Parses one certificate (DER bytes or a single PEM block) into a @peculiar/x509 certificate. */
export function parseCertificate(input: Uint8Array | string): x509.X509Certificate {
  try {
    return new x509.X509Certificate(input as Uint8Array<ArrayBuffer> | string);
  } catch (err) {
    throw new PkiError('ERR_PKI_CERT_INVALID', 'certificate cannot be parsed', err);
  }
}
