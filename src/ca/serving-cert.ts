/**
 * The CA's own TLS serving certificate, issued by its signer so clients trust it with the mesh
 * root: a fresh ECDSA P-256 key, DNS SANs from the configuration (and IP SANs for entries that
 * are IP addresses), serverAuth, CA:false, notAfter clamped to the signer. Built on the general
 * @peculiar/x509 path (it is made once per rotation, not per request).
 */
import { isIP } from 'node:net';
import {
  LEAF_BACKDATE_MS,
  computedKeyId,
  exportPkcs8Pem,
  exportSpkiDer,
  generateKeyPair,
  pemEncode,
  randomSerial,
  toSigningCryptoKey,
  x509,
  type CaKeyMaterial,
  type KeySpec,
} from '../pki/index.js';
import type { ServingCertificate } from './signer.js';

export async function issueServingCertificate(
  material: CaKeyMaterial,
  request: { readonly dnsNames: readonly string[]; readonly ttlSeconds: number; readonly nowMs: number },
): Promise<ServingCertificate> {
  const { privateKey } = await generateKeyPair();
  const nowSec = Math.floor(request.nowMs / 1000) * 1000;
  const notAfterMs = Math.min(nowSec + request.ttlSeconds * 1000, material.notAfterMs);
  const names = request.dnsNames.map((n) => (isIP(n) ? { type: 'ip' as const, value: n } : { type: 'dns' as const, value: n }));
  const alg = signingAlgorithm(material.keySpec);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial().toString('hex'),
    subject: new x509.Name(''),
    issuer: material.cert.subjectName,
    notBefore: new Date(nowSec - LEAF_BACKDATE_MS),
    notAfter: new Date(notAfterMs),
    publicKey: exportSpkiDer(privateKey),
    signingKey: await toSigningCryptoKey(material.keyObject),
    signingAlgorithm: { name: alg.name, hash: alg.hash },
    extensions: [
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.AuthorityKeyIdentifierExtension(
        material.cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId ?? computedKeyId(material.cert).toString('hex'),
      ),
      new x509.SubjectAlternativeNameExtension(names, true),
    ],
  });
  const chain = [pemEncode('CERTIFICATE', new Uint8Array(cert.rawData))];
  if (!material.signerIsRoot) chain.push(material.certPem);
  for (const c of material.chain) chain.push(pemEncode('CERTIFICATE', new Uint8Array(c.rawData)));
  return { certChainPem: chain.join(''), privateKeyPem: exportPkcs8Pem(privateKey), notAfterMs };
}

/** WebCrypto signing parameters for a CA key (ECDSA hash follows the curve, RSA uses PKCS#1 v1.5). */
function signingAlgorithm(spec: KeySpec): { name: string; hash: string } {
  if (spec.kind === 'ec') return { name: 'ECDSA', hash: spec.curve === 'P-384' ? 'SHA-384' : 'SHA-256' };
  return { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' };
}
