/**
 * Self-signed roots and intermediates, built with @peculiar/x509 (general path; a CA is made
 * rarely). Profile: CA:true (critical, optional pathLen), keyUsage critical keyCertSign +
 * cRLSign, SKI (SHA-1 of the key bits, as Go), AKI = issuer SKI for intermediates, 128-bit
 * random serial, notBefore = now - 2 min, notAfter = now + ttl (clamped to the issuer's for
 * intermediates).
 */
import type { KeyObject } from 'node:crypto';
import { webCryptoAlgorithmForKey } from './algorithms.js';
import { certificateFields, keyIdentifier } from './cert-fields.js';
import { PkiError } from './errors.js';
import { exportSpkiDer, generateKeyPair, keySpecOf, P256, type KeySpec } from './keys.js';
import { pemEncode } from './pem.js';
import { LEAF_BACKDATE_MS, randomSerial, type RandomBytes } from './profile.js';
import { toSigningCryptoKey, x509 } from './x509-lib.js';

export interface CreateCaOptions {
  /** Distinguished name, e.g. 'O=cluster.local' or 'CN=Intermediate CA, O=example'. */
  readonly subject: string;
  readonly ttlSeconds: number;
  /** Key to create (default ECDSA P-256); ignored when `privateKey` is given. */
  readonly keySpec?: KeySpec;
  /** Use this key instead of generating one. */
  readonly privateKey?: KeyObject;
  readonly pathLength?: number;
  readonly nowMs?: number;
  readonly randomBytes?: RandomBytes;
}

export interface CaCertificate {
  readonly cert: x509.X509Certificate;
  readonly der: Buffer;
  readonly pem: string;
  readonly privateKey: KeyObject;
}

export interface Issuer {
  readonly cert: x509.X509Certificate;
  readonly privateKey: KeyObject;
}

async function buildCa(options: CreateCaOptions, issuer: Issuer | undefined): Promise<CaCertificate> {
  if (!Number.isSafeInteger(options.ttlSeconds) || options.ttlSeconds <= 0) {
    throw new PkiError('ERR_PKI_TTL_INVALID', `CA TTL must be a positive whole number of seconds, got ${String(options.ttlSeconds)}`);
  }
  const privateKey = options.privateKey ?? (await generateKeyPair(options.keySpec ?? P256)).privateKey;
  keySpecOf(privateKey);
  const spki = exportSpkiDer(privateKey);
  const nowSec = Math.floor((options.nowMs ?? Date.now()) / 1000) * 1000;
  let notAfterMs = nowSec + options.ttlSeconds * 1000;
  if (issuer) {
    const issuerNotAfter = issuer.cert.notAfter.getTime();
    if (issuerNotAfter <= nowSec) throw new PkiError('ERR_PKI_SIGNER_EXPIRED', 'issuing CA certificate has expired');
    notAfterMs = Math.min(notAfterMs, issuerNotAfter);
  }
  const signingKey = issuer ? issuer.privateKey : privateKey;
  const signingSpec = keySpecOf(signingKey);
  const extensions: x509.Extension[] = [
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    new x509.BasicConstraintsExtension(true, options.pathLength, true),
    new x509.SubjectKeyIdentifierExtension(keyIdentifier(spki).toString('hex')),
  ];
  if (issuer) {
    const issuerSki = keyIdentifier(certificateFields(new Uint8Array(issuer.cert.rawData)).spki);
    extensions.push(new x509.AuthorityKeyIdentifierExtension(issuerSki.toString('hex')));
  }
  const alg = webCryptoAlgorithmForKey(signingSpec);
  const subjectName = parseCaSubject(options.subject);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(options.randomBytes).toString('hex'),
    subject: subjectName,
    issuer: issuer ? new x509.Name(certificateFields(new Uint8Array(issuer.cert.rawData)).subjectDer) : subjectName,
    notBefore: new Date(nowSec - LEAF_BACKDATE_MS),
    notAfter: new Date(notAfterMs),
    publicKey: spki,
    signingKey: await toSigningCryptoKey(signingKey),
    signingAlgorithm: { name: alg.name, hash: alg.hash },
    extensions,
  });
  const der = Buffer.from(cert.rawData);
  return { cert, der, pem: pemEncode('CERTIFICATE', der), privateKey };
}

const RDN_PART = /^\s*([A-Za-z][A-Za-z0-9-]*|\d+(\.\d+)+)\s*=\s*\S/;

/**
 * A CA subject such as 'O=cluster.local, CN=Root'. @peculiar/x509 accepts almost any text
 * (turning nonsense into an empty name), so each comma-separated part is checked first.
 */
export function parseCaSubject(subject: string): x509.Name {
  const bad = (cause?: unknown) =>
    new PkiError('ERR_PKI_CERT_INVALID', `CA subject ${JSON.stringify(subject)} is not a distinguished name like "O=example, CN=Root"`, cause);
  const parts = subject.split(/(?<!\\),/);
  if (subject.trim() === '' || parts.some((p) => !RDN_PART.test(p))) throw bad();
  let name: x509.Name;
  try {
    name = new x509.Name(subject);
  } catch (err) {
    throw bad(err);
  }
  if (name.toArrayBuffer().byteLength <= 2) throw bad();
  return name;
}

/** A self-signed root CA. */
export function createRootCa(options: CreateCaOptions): Promise<CaCertificate> {
  return buildCa(options, undefined);
}

/** An intermediate CA signed by `issuer`. */
export function createIntermediateCa(options: CreateCaOptions & { readonly issuer: Issuer }): Promise<CaCertificate> {
  return buildCa(options, options.issuer);
}
