/**
 * PKCS#10 certificate signing requests.
 *
 * - `createCsr` builds a CSR the way ztunnel does: version 0, empty subject, the key's SPKI,
 *   and an extensionRequest attribute holding one critical subjectAltName with one URI.
 * - `parseCsr` is the fast, strict path the CA uses per request: a minimal DER walk that
 *   extracts the CertificationRequestInfo bytes, the SPKI, the signature algorithm and the
 *   signature, then verifies the signature with node:crypto. It does not look at the
 *   requested SANs (the CA ignores them).
 * - `readCsrDetails` (csr-details.ts, kept apart so the issuing path and its worker threads do
 *   not load @peculiar/x509) adds the subject and requested URIs (diagnostics, tests).
 */
import { createPublicKey, KeyObject, sign, verify, webcrypto } from 'node:crypto';
import { findSignatureAlgorithm, signatureAlgorithmForKey, type SignatureAlgorithm } from './algorithms.js';
import {
  encodeOid,
  expectTlv,
  readTlv,
  tlv,
  TAG_BIT_STRING,
  TAG_BOOLEAN,
  TAG_INTEGER,
  TAG_NULL,
  TAG_OCTET_STRING,
  TAG_OID,
  TAG_SEQUENCE,
  TAG_SET,
} from './der.js';
import { PkiError } from './errors.js';
import { exportSpkiDer, keySpecOf, type KeySpec } from './keys.js';
import { pemEncode } from './pem.js';
import { encodeServingNames } from './serving-names.js';

export const CSR_PEM_TYPES: readonly string[] = ['CERTIFICATE REQUEST', 'NEW CERTIFICATE REQUEST'];
/** Upper bound on a CSR we are willing to parse (RSA 4096 CSRs are ~1.7 KB). */
export const MAX_CSR_BYTES = 64 * 1024;

const OID_EXTENSION_REQUEST = encodeOid('1.2.840.113549.1.9.14');
const OID_SAN = encodeOid('2.5.29.17');
const P256_SPKI_PREFIX = Buffer.from('3059301306072a8648ce3d020106082a8648ce3d030107034200', 'hex');

export interface CreateCsrOptions {
  readonly privateKey: KeyObject;
  /** The URI SAN to request, normally a SPIFFE ID; absent: a CSR for `servingNames` only. */
  readonly uri?: string;
  /** DNS names and IP literals to request (serving-names.ts encoding, before the URI). */
  readonly servingNames?: readonly string[];
}

export interface Csr {
  readonly der: Buffer;
  readonly pem: string;
}

/** Builds and signs a ztunnel-style CSR (empty subject, one critical subjectAltName: the serving names, then the URI). */
export function createCsr(options: CreateCsrOptions): Csr {
  const spec = keySpecOf(options.privateKey);
  const alg = signatureAlgorithmForKey(spec);
  const spki = exportSpkiDer(options.privateKey);
  const names = [encodeServingNames(options.servingNames ?? [])];
  if (options.uri !== undefined) names.push(tlv(0x86, Buffer.from(options.uri, 'utf8')));
  const sanValue = tlv(TAG_SEQUENCE, ...names);
  const sanExt = tlv(TAG_SEQUENCE, OID_SAN, Buffer.from([TAG_BOOLEAN, 1, 0xff]), tlv(TAG_OCTET_STRING, sanValue));
  const attr = tlv(TAG_SEQUENCE, OID_EXTENSION_REQUEST, tlv(TAG_SET, tlv(TAG_SEQUENCE, sanExt)));
  const info = tlv(
    TAG_SEQUENCE,
    Buffer.from([TAG_INTEGER, 1, 0]),
    Buffer.from([TAG_SEQUENCE, 0]),
    spki,
    tlv(0xa0, attr),
  );
  const signature = sign(alg.hash, info, options.privateKey);
  const der = tlv(TAG_SEQUENCE, info, alg.der, tlv(TAG_BIT_STRING, Buffer.from([0]), signature));
  return { der, pem: pemEncode('CERTIFICATE REQUEST', der) };
}

/** A CSR whose structure was read and whose signature verified. */
export interface VerifiedCsr {
  /** SubjectPublicKeyInfo DER, as it will go into the certificate. */
  readonly spki: Buffer;
  readonly publicKey: KeyObject;
  readonly keySpec: KeySpec;
  readonly signatureAlgorithm: SignatureAlgorithm;
}

export function malformed(what: string, cause?: unknown): PkiError {
  return new PkiError('ERR_PKI_CSR_MALFORMED', `malformed CSR: ${what}`, cause);
}

/** PEM text (string or bytes) -> DER, fast path for the one-block case. */
export function csrDer(input: string | Uint8Array): Buffer {
  let text: string;
  if (typeof input === 'string') text = input;
  else if (input.length > 0 && input[0] === TAG_SEQUENCE) return Buffer.from(input);
  else text = Buffer.from(input).toString('latin1');
  if (text.length > MAX_CSR_BYTES * 2) throw malformed('too large');
  const begin = text.indexOf('-----BEGIN ');
  if (begin < 0) throw new PkiError('ERR_PKI_PEM_EMPTY', 'no PEM CERTIFICATE REQUEST found');
  const labelEnd = text.indexOf('-----', begin + 11);
  if (labelEnd < 0) throw new PkiError('ERR_PKI_PEM_INVALID', 'PEM BEGIN line is not terminated');
  const label = text.slice(begin + 11, labelEnd);
  if (!CSR_PEM_TYPES.includes(label)) {
    throw new PkiError('ERR_PKI_PEM_TYPE', `expected PEM CERTIFICATE REQUEST, found ${label.slice(0, 40)}`);
  }
  const bodyStart = labelEnd + 5;
  const endMarker = `-----END ${label}-----`;
  const end = text.indexOf(endMarker, bodyStart);
  if (end < 0) throw new PkiError('ERR_PKI_PEM_INVALID', 'PEM CERTIFICATE REQUEST has no END line');
  if (!isStrictBase64Body(text, bodyStart, end)) {
    throw new PkiError('ERR_PKI_PEM_INVALID', 'PEM CERTIFICATE REQUEST has invalid base64');
  }
  if (text.indexOf('-----BEGIN ', end + endMarker.length) >= 0) {
    throw new PkiError('ERR_PKI_PEM_INVALID', 'expected one PEM CERTIFICATE REQUEST, found more blocks');
  }
  // node's base64 decoder skips the whitespace the scan above allowed: no stripped copy of the body.
  return Buffer.from(text.slice(bodyStart, end), 'base64');
}

const WHITESPACE = /\s/;

/**
 * `text[start, end)` is base64 once whitespace (`\s`) is dropped: at least one alphabet
 * character, at most two `=` and only at the end, a multiple of 4 long. One pass over the
 * characters, no copy (the per-request path: this used to strip the body with a regex first).
 */
function isStrictBase64Body(text: string, start: number, end: number): boolean {
  let chars = 0;
  let pad = 0;
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    const alphabet = (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || (c >= 48 && c <= 57) || c === 43 || c === 47;
    if (alphabet) {
      if (pad > 0) return false;
      chars++;
    } else if (c === 61) {
      if (++pad > 2) return false;
    } else if (!(c === 10 || c === 13 || c === 32 || c === 9 || WHITESPACE.test(text[i]!))) {
      return false;
    }
  }
  return chars > 0 && (chars + pad) % 4 === 0;
}

/** The pieces of a structurally valid CSR, before its key is imported and its signature checked. */
interface CsrParts {
  readonly der: Buffer;
  readonly spki: Buffer;
  readonly alg: SignatureAlgorithm;
  readonly infoStart: number;
  readonly infoEnd: number;
  readonly sigStart: number;
  readonly sigEnd: number;
}

/** The strict DER walk shared by `parseCsr` and `parseCsrAsync`. */
function readCsrParts(input: string | Uint8Array): CsrParts {
  const der = csrDer(input);
  if (der.length > MAX_CSR_BYTES) throw malformed('too large');
  let infoStart: number, infoEnd: number, spki: Buffer;
  let alg: SignatureAlgorithm | undefined;
  let sigStart: number, sigEnd: number;
  try {
    const outer = expectTlv(der, 0, der.length, TAG_SEQUENCE, 'CertificationRequest');
    if (outer.end !== der.length) throw malformed('trailing data after the CSR');
    const info = expectTlv(der, outer.contentStart, outer.end, TAG_SEQUENCE, 'CertificationRequestInfo');
    infoStart = info.start;
    infoEnd = info.end;
    const version = expectTlv(der, info.contentStart, info.end, TAG_INTEGER, 'version');
    if (version.end - version.contentStart !== 1 || der[version.contentStart] !== 0) throw malformed('version is not 0');
    const subject = expectTlv(der, version.end, info.end, TAG_SEQUENCE, 'subject');
    const spkiTlv = expectTlv(der, subject.end, info.end, TAG_SEQUENCE, 'subjectPKInfo');
    spki = der.subarray(spkiTlv.start, spkiTlv.end);
    if (spkiTlv.end < info.end) {
      const attrs = readTlv(der, spkiTlv.end, info.end);
      if (attrs.tag !== 0xa0 || attrs.end !== info.end) throw malformed('bad attributes');
    }
    const algTlv = expectTlv(der, info.end, outer.end, TAG_SEQUENCE, 'signatureAlgorithm');
    const oid = expectTlv(der, algTlv.contentStart, algTlv.end, TAG_OID, 'signatureAlgorithm OID');
    if (oid.end !== algTlv.end) {
      const params = readTlv(der, oid.end, algTlv.end);
      if (params.tag !== TAG_NULL || params.end !== algTlv.end || params.contentStart !== params.end) {
        throw malformed('unexpected signature algorithm parameters');
      }
    }
    alg = findSignatureAlgorithm(der, oid.contentStart, oid.end);
    const sig = expectTlv(der, algTlv.end, outer.end, TAG_BIT_STRING, 'signature');
    if (sig.end !== outer.end) throw malformed('trailing data after the signature');
    if (sig.end - sig.contentStart < 2 || der[sig.contentStart] !== 0) throw malformed('signature bit string');
    sigStart = sig.contentStart + 1;
    sigEnd = sig.end;
  } catch (err) {
    if (err instanceof PkiError && err.code === 'ERR_PKI_CSR_MALFORMED') throw err;
    throw malformed(err instanceof Error ? err.message : 'unreadable', err);
  }
  if (!alg) throw new PkiError('ERR_PKI_CSR_UNSUPPORTED_ALGORITHM', 'CSR signature algorithm is not supported');
  return { der, spki, alg, infoStart, infoEnd, sigStart, sigEnd };
}

/** Checks the imported key against the signature algorithm and verifies the signature. */
function verifyCsrParts(parts: CsrParts, key: { publicKey: KeyObject; keySpec: KeySpec }): VerifiedCsr {
  const { der, alg } = parts;
  if (key.keySpec.kind !== alg.keyKind) {
    throw new PkiError('ERR_PKI_CSR_UNSUPPORTED_ALGORITHM', `CSR signature algorithm ${alg.name} does not match its ${key.keySpec.kind} key`);
  }
  let ok = false;
  try {
    ok = verify(alg.hash, der.subarray(parts.infoStart, parts.infoEnd), key.publicKey, der.subarray(parts.sigStart, parts.sigEnd));
  } catch {
    ok = false;
  }
  if (!ok) throw new PkiError('ERR_PKI_CSR_SIGNATURE_INVALID', 'CSR signature does not verify');
  // `der` is this call's own copy (csrDer never returns the caller's bytes): the SPKI can stay a view of it.
  return { spki: parts.spki, publicKey: key.publicKey, keySpec: key.keySpec, signatureAlgorithm: alg };
}

/**
 * The SubjectPublicKeyInfo DER of a CSR whose structure is valid (the strict walk `parseCsr`
 * starts with, with its ERR_PKI_PEM_*, ERR_PKI_CSR_MALFORMED and ERR_PKI_CSR_UNSUPPORTED_ALGORITHM
 * codes), without importing the key or checking the signature: for a relay whose CA does both
 * (the broker's Istio CA front compares the leaf's key with it).
 */
export function csrPublicKeyInfo(input: string | Uint8Array): Buffer {
  return readCsrParts(input).spki;
}

/**
 * A bare SubjectPublicKeyInfo (DER) imported as a CSR's key would be, for a leaf whose key
 * possession was proven some other way (a PodCertificateRequest's, checked by the API server):
 * ERR_PKI_CSR_UNSUPPORTED_KEY for anything but P-256, P-384 and RSA 2048/3072/4096.
 */
export function importSubjectKey(spki: Uint8Array): { spki: Buffer; publicKey: KeyObject; keySpec: KeySpec } {
  const der = Buffer.from(spki);
  return { spki: der, ...importCsrKey(der) };
}

/**
 * Parses a CSR (PEM or DER) and verifies its signature. Coded errors: ERR_PKI_PEM_* (not a CSR
 * PEM), ERR_PKI_CSR_MALFORMED (garbage), ERR_PKI_CSR_UNSUPPORTED_ALGORITHM,
 * ERR_PKI_CSR_UNSUPPORTED_KEY, ERR_PKI_CSR_SIGNATURE_INVALID.
 */
export function parseCsr(input: string | Uint8Array): VerifiedCsr {
  const parts = readCsrParts(input);
  return verifyCsrParts(parts, importCsrKey(parts.spki));
}

/**
 * `parseCsr` with the same checks and error codes, faster for uncompressed P-256 keys (the
 * CA's common case): the point is imported through WebCrypto's raw import, which checks that it
 * lies on the curve (enough for P-256, cofactor 1) but skips the JWK route's extra scalar
 * multiplication by the group order — ~20 % of a whole issue. WebCrypto only offers the
 * import as a promise, hence async; the work itself is synchronous.
 */
export async function parseCsrAsync(input: string | Uint8Array): Promise<VerifiedCsr> {
  const parts = readCsrParts(input);
  const spki = parts.spki;
  if (!isUncompressedP256(spki)) return verifyCsrParts(parts, importCsrKey(spki));
  let publicKey: KeyObject;
  try {
    // No usages: a public key may have none, the key is only handed to node:crypto's verify, and
    // WebCrypto then has no usage list to convert and copy (~0.5 KB less per CSR).
    const cryptoKey = await webcrypto.subtle.importKey('raw', spki.subarray(26), P256_IMPORT, false, NO_USAGES);
    publicKey = KeyObject.from(cryptoKey);
  } catch (err) {
    throw new PkiError('ERR_PKI_CSR_UNSUPPORTED_KEY', 'CSR public key is not a valid P-256 point', err);
  }
  return verifyCsrParts(parts, { publicKey, keySpec: P256_SPEC });
}

const P256_IMPORT = Object.freeze({ name: 'ECDSA', namedCurve: 'P-256' });
const NO_USAGES: webcrypto.KeyUsage[] = [];

function isUncompressedP256(spki: Buffer): boolean {
  return spki.length === 91 && spki[26] === 0x04 && spki.compare(P256_SPKI_PREFIX, 0, P256_SPKI_PREFIX.length, 0, P256_SPKI_PREFIX.length) === 0;
}

const P256_SPEC: KeySpec = Object.freeze({ kind: 'ec', curve: 'P-256' });

/**
 * The CSR's public key as a KeyObject. An uncompressed P-256 SPKI (the common case) is
 * imported from its coordinates as a JWK: OpenSSL 3.0's generic DER decoder costs ~2x the
 * whole rest of the import. The coordinates are checked on the curve either way; anything
 * else takes the DER route.
 */
function importCsrKey(spki: Buffer): { publicKey: KeyObject; keySpec: KeySpec } {
  if (isUncompressedP256(spki)) {
    try {
      const publicKey = createPublicKey({
        key: { kty: 'EC', crv: 'P-256', x: spki.toString('base64url', 27, 59), y: spki.toString('base64url', 59, 91) },
        format: 'jwk',
      });
      return { publicKey, keySpec: P256_SPEC };
    } catch (err) {
      throw new PkiError('ERR_PKI_CSR_UNSUPPORTED_KEY', 'CSR public key is not a valid P-256 point', err);
    }
  }
  let publicKey: KeyObject;
  try {
    publicKey = createPublicKey({ key: spki, format: 'der', type: 'spki' });
  } catch (err) {
    throw new PkiError('ERR_PKI_CSR_UNSUPPORTED_KEY', 'CSR public key cannot be parsed or is not supported', err);
  }
  try {
    return { publicKey, keySpec: keySpecOf(publicKey) };
  } catch (err) {
    throw new PkiError('ERR_PKI_CSR_UNSUPPORTED_KEY', `CSR key: ${err instanceof Error ? err.message : 'unsupported'}`, err);
  }
}
