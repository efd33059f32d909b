/**
 * `CaKeyMaterial`: a signing CA as the CA server uses it — the signing certificate, its key
 * as a KeyObject (parsed once), the intermediates above it, the trusted roots — plus the
 * precomputed `LeafSigner` for the fast leaf path and the response chain.
 */
import { X509Certificate as NodeX509, type KeyObject } from 'node:crypto';
import { certificateFields, keyIdentifier } from './cert-fields.js';
import { PkiError } from './errors.js';
import { keyMatches, keySpecOf, type KeySpec } from './keys.js';
import type { LeafSigner } from './leaf-template.js';
import { pemEncode } from './pem.js';
import { x509 } from './x509-lib.js';

export interface CaKeyMaterial {
  /** The certificate that signs leaves. */
  readonly cert: x509.X509Certificate;
  readonly certDer: Buffer;
  readonly certPem: string;
  /** Its private key, parsed once. Never log it. */
  readonly keyObject: KeyObject;
  readonly keySpec: KeySpec;
  /** Intermediates above `cert`, nearest first; excludes `cert` itself and the roots. */
  readonly chain: readonly x509.X509Certificate[];
  /** Trusted roots (several during a root rotation). */
  readonly roots: readonly x509.X509Certificate[];
  /** Plain data for the fast leaf path (and worker threads). */
  readonly leafSigner: LeafSigner;
  readonly notAfterMs: number;
  /** True when `cert` is itself one of the roots (self-signed CA mode). */
  readonly signerIsRoot: boolean;
}

export interface CaKeyMaterialInput {
  readonly cert: x509.X509Certificate;
  readonly keyObject: KeyObject;
  readonly chain?: readonly x509.X509Certificate[];
  /** Default: [cert] (a self-signed root signing directly). */
  readonly roots?: readonly x509.X509Certificate[];
}

/** Builds the material; checks only that the key belongs to the certificate. */
export function caKeyMaterial(input: CaKeyMaterialInput): CaKeyMaterial {
  const certDer = Buffer.from(input.cert.rawData);
  const fields = certificateFields(certDer);
  const keySpec = keySpecOf(input.keyObject);
  if (input.keyObject.type !== 'private') throw new PkiError('ERR_PKI_KEY_INVALID', 'CA key is not a private key');
  if (!keyMatches(input.keyObject, fields.spki)) {
    throw new PkiError('ERR_PKI_CACERTS_KEY_MISMATCH', 'CA private key does not match the CA certificate');
  }
  const roots = input.roots ?? [input.cert];
  const skiExt = input.cert.getExtension(x509.SubjectKeyIdentifierExtension);
  const notAfterMs = input.cert.notAfter.getTime();
  return {
    cert: input.cert,
    certDer,
    certPem: pemEncode('CERTIFICATE', certDer),
    keyObject: input.keyObject,
    keySpec,
    chain: input.chain ?? [],
    roots,
    notAfterMs,
    signerIsRoot: roots.some((r) => Buffer.from(r.rawData).equals(certDer)),
    leafSigner: {
      subjectDer: Buffer.from(fields.subjectDer),
      // Go's x509 copies the parent's SKI into the child's AKI; with no SKI there is no AKI.
      subjectKeyId: skiExt ? Buffer.from(skiExt.keyId, 'hex') : undefined,
      notAfterMs,
      keySpec,
      privateKey: input.keyObject,
    },
  };
}

/**
 * Checks that `cert` may sign certificates at `nowMs`: basicConstraints cA:true, keyCertSign when it
 * has a keyUsage extension (RFC 5280: without one its key is unrestricted), and inside its validity.
 * `what` names it in the message (e.g. 'ca-cert.pem'). ERR_PKI_SIGNER_NOT_CA, ERR_PKI_SIGNER_EXPIRED.
 */
export function checkSigningCa(cert: x509.X509Certificate, nowMs: number, what: string): void {
  const bc = cert.getExtension(x509.BasicConstraintsExtension);
  const ku = cert.getExtension(x509.KeyUsagesExtension);
  if (!bc?.ca || (ku && !(ku.usages & x509.KeyUsageFlags.keyCertSign))) {
    throw new PkiError('ERR_PKI_SIGNER_NOT_CA', `${what} is not a CA certificate (needs cA:true and keyCertSign)`);
  }
  if (cert.notAfter.getTime() <= nowMs) {
    throw new PkiError('ERR_PKI_SIGNER_EXPIRED', `${what} expired (notAfter ${cert.notAfter.toISOString()})`);
  }
  if (cert.notBefore.getTime() > nowMs) {
    throw new PkiError('ERR_PKI_SIGNER_EXPIRED', `${what} is not valid yet (notBefore ${cert.notBefore.toISOString()})`);
  }
}

/**
 * Material for a root that signs leaves directly (the self-signed CA's stored root), checked as a
 * plug-in root is: a CA that may sign now (`checkSigningCa`), self-signed (its issuer is its
 * subject and its signature verifies with its own key; ERR_PKI_CERT_INVALID otherwise), and `keyObject`
 * its key (ERR_PKI_CACERTS_KEY_MISMATCH).
 */
export function rootCaKeyMaterial(input: { readonly cert: x509.X509Certificate; readonly keyObject: KeyObject }, nowMs: number, what: string): CaKeyMaterial {
  checkSigningCa(input.cert, nowMs, what);
  const der = new Uint8Array(input.cert.rawData);
  const fields = certificateFields(der);
  const node = new NodeX509(der);
  if (!fields.subjectDer.equals(fields.issuerDer) || !node.verify(node.publicKey)) {
    throw new PkiError('ERR_PKI_CERT_INVALID', `${what} is not a self-signed root (issuer ${input.cert.issuer})`);
  }
  return caKeyMaterial(input);
}

/**
 * What goes after the leaf in an IstioCertificateResponse: the signing cert (unless it is a
 * root), each intermediate, then all roots concatenated as the last element.
 */
export function responseChainPems(material: CaKeyMaterial): string[] {
  let cached = chainCache.get(material);
  if (!cached) {
    cached = buildResponseChain(material);
    chainCache.set(material, cached);
  }
  return [...cached];
}

const chainCache = new WeakMap<CaKeyMaterial, readonly string[]>();

function buildResponseChain(material: CaKeyMaterial): string[] {
  const out: string[] = [];
  if (!material.signerIsRoot) out.push(material.certPem);
  for (const c of material.chain) out.push(pemEncode('CERTIFICATE', new Uint8Array(c.rawData)));
  out.push(rootBundlePem(material));
  return out;
}

/** All roots as one PEM text (root-cert.pem content). */
export function rootBundlePem(material: CaKeyMaterial): string {
  return material.roots.map((r) => pemEncode('CERTIFICATE', new Uint8Array(r.rawData))).join('');
}

/** The key identifier a CA certificate's SKI would have if it lacks one (SHA-1 of its key). */
export function computedKeyId(cert: x509.X509Certificate): Buffer {
  return keyIdentifier(certificateFields(new Uint8Array(cert.rawData)).spki);
}
