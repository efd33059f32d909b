/**
 * Validation of an Istio plug-in CA bundle (`cacerts`: ca-cert.pem, ca-key.pem,
 * cert-chain.pem, root-cert.pem) — pure: it gets the four texts, not paths.
 * - ca-cert.pem: exactly one certificate, a CA (cA + keyCertSign), valid now;
 * - ca-key.pem: its private key (ERR_PKI_CACERTS_KEY_MISMATCH otherwise);
 * - root-cert.pem: one or more self-signed CA roots (several during a rotation);
 * - cert-chain.pem: ca-cert first (as Istio writes it), then intermediates, optionally the
 *   root; the chain from ca-cert must reach one of the roots (ERR_PKI_CACERTS_INCONSISTENT).
 */
import { caKeyMaterial, checkSigningCa, type CaKeyMaterial } from './ca-material.js';
import { parseCertificates, verifyChain } from './chain.js';
import { certificateFields } from './cert-fields.js';
import { PkiError } from './errors.js';
import { keyMatches, parsePrivateKeyPem } from './keys.js';
import { x509 } from './x509-lib.js';

export const CACERTS_FILES = ['ca-cert.pem', 'ca-key.pem', 'cert-chain.pem', 'root-cert.pem'] as const;

export interface CaBundleTexts {
  readonly caCertPem: string;
  readonly caKeyPem: string;
  readonly certChainPem: string;
  readonly rootCertPem: string;
}

function inconsistent(message: string, cause?: unknown): PkiError {
  return new PkiError('ERR_PKI_CACERTS_INCONSISTENT', message, cause);
}

function wrap<T>(file: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof PkiError && err.code.startsWith('ERR_PKI_CACERTS')) throw err;
    const code = err instanceof PkiError ? err.code : 'error';
    throw inconsistent(`${file}: ${err instanceof Error ? err.message : String(err)} (${code})`, err);
  }
}

export function validateCaBundle(texts: CaBundleTexts, nowMs: number): CaKeyMaterial {
  const caCerts = wrap('ca-cert.pem', () => parseCertificates(texts.caCertPem, 'certificate in ca-cert.pem'));
  if (caCerts.length !== 1) throw inconsistent(`ca-cert.pem must hold exactly one certificate, found ${caCerts.length}`);
  const caCert = caCerts[0]!;
  const key = wrap('ca-key.pem', () => parsePrivateKeyPem(texts.caKeyPem));
  if (!keyMatches(key, certificateFields(new Uint8Array(caCert.rawData)).spki)) {
    throw new PkiError('ERR_PKI_CACERTS_KEY_MISMATCH', 'ca-key.pem does not match ca-cert.pem');
  }
  checkSigningCa(caCert, nowMs, 'ca-cert.pem');
  const roots = wrap('root-cert.pem', () => parseCertificates(texts.rootCertPem, 'certificate in root-cert.pem'));
  for (const r of roots) {
    const f = certificateFields(new Uint8Array(r.rawData));
    if (!f.subjectDer.equals(f.issuerDer)) throw inconsistent(`root-cert.pem holds a non-self-signed certificate (${r.subject})`);
  }
  const chainCerts = wrap('cert-chain.pem', () => parseCertificates(texts.certChainPem, 'certificate in cert-chain.pem'));
  const caDer = Buffer.from(caCert.rawData);
  if (!Buffer.from(chainCerts[0]!.rawData).equals(caDer)) {
    throw inconsistent('cert-chain.pem must start with the certificate in ca-cert.pem');
  }
  const rootDers = roots.map((r) => Buffer.from(r.rawData));
  const intermediates = chainCerts.slice(1).filter((c) => !rootDers.some((d) => d.equals(Buffer.from(c.rawData))));
  let path: x509.X509Certificate[];
  try {
    path = verifyChain({ leaf: caCert, intermediates, roots, nowMs, leafIsCa: true });
  } catch (err) {
    throw inconsistent(`ca-cert.pem does not chain to root-cert.pem: ${err instanceof Error ? err.message : String(err)}`, err);
  }
  // The path is [caCert, ...intermediates, root] (or [root] when caCert is itself a root).
  const chain = path.slice(1, -1);
  if (chain.length !== intermediates.length) {
    throw inconsistent('cert-chain.pem holds certificates that are not on the path from ca-cert.pem to the root');
  }
  return caKeyMaterial({ cert: caCert, keyObject: key, chain, roots });
}
