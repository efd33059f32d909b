/** Test fixtures: a root CA, and arbitrary (possibly broken) certificates built with @peculiar/x509. */
import assert from 'node:assert/strict';
import type { KeyObject } from 'node:crypto';
import {
  caKeyMaterial,
  createRootCa,
  exportSpkiDer,
  generateKeyPair,
  PkiError,
  toSigningCryptoKey,
  x509,
  type CaCertificate,
  type CaKeyMaterial,
  type LeafSigner,
} from '../../src/pki/index.js';

export interface TestCa {
  readonly root: CaCertificate;
  readonly material: CaKeyMaterial;
}

export async function makeRoot(subject = 'O=cluster.local', ttlSeconds = 365 * 86400): Promise<TestCa> {
  const root = await createRootCa({ subject, ttlSeconds });
  return { root, material: caKeyMaterial({ cert: root.cert, keyObject: root.privateKey }) };
}

/** The leaf pool tests' CA: a one-day root for cluster.local and its leaf signer. */
export async function makePoolCa(): Promise<{ readonly root: CaCertificate; readonly signer: LeafSigner }> {
  const ca = await makeRoot('O=cluster.local', 86400);
  return { root: ca.root, signer: ca.material.leafSigner };
}

export interface CustomCertOptions {
  readonly issuer: { readonly cert: x509.X509Certificate; readonly privateKey: KeyObject };
  readonly subject?: string;
  readonly extensions: x509.Extension[];
  readonly publicKey?: KeyObject;
}

/** A certificate with exactly the given extensions, signed by `issuer` (ECDSA P-256 SHA-256). */
export async function makeCustomCert(options: CustomCertOptions): Promise<x509.X509Certificate> {
  const pub = options.publicKey ?? (await generateKeyPair()).publicKey;
  const now = Date.now();
  return x509.X509CertificateGenerator.create({
    serialNumber: '01' + Math.floor(Math.random() * 1e8).toString(16),
    subject: options.subject,
    issuer: options.issuer.cert.subjectName,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 3600_000),
    publicKey: new Uint8Array(exportSpkiDer(pub)),
    signingKey: await toSigningCryptoKey(options.issuer.privateKey),
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    extensions: options.extensions,
  });
}

export const uriSan = (uris: string[], critical = true): x509.Extension =>
  new x509.SubjectAlternativeNameExtension(
    uris.map((value) => ({ type: 'url' as const, value })),
    critical,
  );
export const keyUsage = (flags: number, critical = true): x509.Extension => new x509.KeyUsagesExtension(flags, critical);
export const basicConstraints = (ca: boolean): x509.Extension => new x509.BasicConstraintsExtension(ca, undefined, true);
export const KU = x509.KeyUsageFlags;

/** The PkiError code `fn` throws, or 'no error'; any other thrown value fails the test. */
export function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof PkiError, `expected PkiError, got ${String(err)}`);
    return err.code;
  }
  return 'no error';
}
