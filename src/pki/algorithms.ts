/**
 * Signature algorithms we read (CSRs, chains) and write (certificates), with their DER
 * AlgorithmIdentifier. The signer's algorithm follows Go's crypto/x509 (what istiod uses):
 * P-256 -> ecdsa-with-SHA256, P-384 -> ecdsa-with-SHA384, RSA -> sha256WithRSAEncryption.
 */
import { encodeOid, tlv, TAG_NULL, TAG_SEQUENCE } from './der.js';
import type { KeySpec } from './keys.js';

export interface SignatureAlgorithm {
  readonly name: string;
  readonly oid: string;
  /** Which key kind verifies it. */
  readonly keyKind: 'ec' | 'rsa';
  /** node:crypto digest name for sign/verify. */
  readonly hash: 'sha256' | 'sha384' | 'sha512';
  /** DER AlgorithmIdentifier as we write it (RSA with NULL parameters, ECDSA without). */
  readonly der: Buffer;
  /** The OID's content octets (for matching without allocating). */
  readonly oidContent: Buffer;
}

function ecdsa(name: string, oid: string, hash: SignatureAlgorithm['hash']): SignatureAlgorithm {
  const oidDer = encodeOid(oid);
  return { name, oid, keyKind: 'ec', hash, der: tlv(TAG_SEQUENCE, oidDer), oidContent: oidDer.subarray(2) };
}

function rsa(name: string, oid: string, hash: SignatureAlgorithm['hash']): SignatureAlgorithm {
  const oidDer = encodeOid(oid);
  return {
    name,
    oid,
    keyKind: 'rsa',
    hash,
    der: tlv(TAG_SEQUENCE, oidDer, Buffer.from([TAG_NULL, 0])),
    oidContent: oidDer.subarray(2),
  };
}

export const ECDSA_SHA256 = ecdsa('ecdsa-with-SHA256', '1.2.840.10045.4.3.2', 'sha256');
export const ECDSA_SHA384 = ecdsa('ecdsa-with-SHA384', '1.2.840.10045.4.3.3', 'sha384');
export const ECDSA_SHA512 = ecdsa('ecdsa-with-SHA512', '1.2.840.10045.4.3.4', 'sha512');
export const RSA_SHA256 = rsa('sha256WithRSAEncryption', '1.2.840.113549.1.1.11', 'sha256');
export const RSA_SHA384 = rsa('sha384WithRSAEncryption', '1.2.840.113549.1.1.12', 'sha384');
export const RSA_SHA512 = rsa('sha512WithRSAEncryption', '1.2.840.113549.1.1.13', 'sha512');

export const SIGNATURE_ALGORITHMS: readonly SignatureAlgorithm[] = [
  ECDSA_SHA256,
  ECDSA_SHA384,
  ECDSA_SHA512,
  RSA_SHA256,
  RSA_SHA384,
  RSA_SHA512,
];

/** The algorithm whose OID content octets are `buf[start, end)`, or undefined. */
export function findSignatureAlgorithm(buf: Uint8Array, start: number, end: number): SignatureAlgorithm | undefined {
  const len = end - start;
  for (const alg of SIGNATURE_ALGORITHMS) {
    const o = alg.oidContent;
    if (o.length !== len) continue;
    let same = true;
    for (let i = 0; i < len; i++) {
      if (o[i] !== buf[start + i]) {
        same = false;
        break;
      }
    }
    if (same) return alg;
  }
  return undefined;
}

/** What a CA with this key signs with (Go crypto/x509 defaults). */
export function signatureAlgorithmForKey(spec: KeySpec): SignatureAlgorithm {
  if (spec.kind === 'rsa') return RSA_SHA256;
  return spec.curve === 'P-384' ? ECDSA_SHA384 : ECDSA_SHA256;
}

/** The WebCrypto algorithm parameters @peculiar/x509 needs for the same choice. */
export function webCryptoAlgorithmForKey(spec: KeySpec): { readonly name: string; readonly hash: string; readonly namedCurve?: string } {
  if (spec.kind === 'rsa') return { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
  return { name: 'ECDSA', namedCurve: spec.curve, hash: spec.curve === 'P-384' ? 'SHA-384' : 'SHA-256' };
}
