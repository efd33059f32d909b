/**
 * The devcluster's own TLS material, made fresh at every start: a self-signed CA and a serving
 * certificate for loopback and the in-cluster service names. Deliberately tiny and local (the
 * product's PKI lives in src/pki; only its @peculiar/x509 loader and PEM encoder are reused);
 * keys never leave this process except as the PEM the HTTPS server needs.
 */
import { webcrypto } from 'node:crypto';
import { pemEncode } from '../pki/pem.js';
import { x509 } from '../pki/x509-lib.js';

export interface ServingMaterial {
  readonly caCertPem: string;
  readonly certPem: string; // leaf, then CA
  readonly keyPem: string;
}

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

function serial(): string {
  const b = webcrypto.getRandomValues(new Uint8Array(16));
  b[0] = b[0]! & 0x7f;
  return Buffer.from(b).toString('hex');
}

export async function makeServingMaterial(options: { hosts: readonly string[]; nowMs: number }): Promise<ServingMaterial> {
  const notBefore = new Date(options.nowMs - 60 * 60 * 1000);
  const notAfter = new Date(options.nowMs + 365 * 24 * 60 * 60 * 1000);
  const caKeys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=devcluster-ca',
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(caKeys.publicKey),
    ],
  });
  const leafKeys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const names: Array<{ type: 'dns' | 'ip'; value: string }> = [];
  const hosts = new Set(['localhost', '127.0.0.1', '::1', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local', ...options.hosts]);
  for (const h of hosts) {
    const isIp = /^[0-9.]+$/.test(h) || h.includes(':');
    names.push({ type: isIp ? 'ip' : 'dns', value: h });
  }
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: 'CN=kube-apiserver',
    issuer: ca.subject,
    notBefore,
    notAfter,
    publicKey: leafKeys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth], false),
      new x509.SubjectAlternativeNameExtension(names, false),
      await x509.AuthorityKeyIdentifierExtension.create(ca, false),
    ],
  });
  const keyDer = await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey);
  const caPem = ca.toString('pem') + '\n';
  return { caCertPem: caPem, certPem: leaf.toString('pem') + '\n' + caPem, keyPem: pemEncode('PRIVATE KEY', new Uint8Array(keyDer)) };
}
