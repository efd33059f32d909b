/**
 * The kubelet's key generation for podCertificate projected volumes (pkg/kubelet/podcertificate
 * generateKeyAndProof): one fresh key per request, of the volume's `keyType`, and the proof of
 * possession kube-apiserver verifies — the pod UID signed with it (Ed25519 over the UID, ECDSA
 * ASN.1 and RSA-PSS over its SHA-256). The private key leaves as PKCS#8 PEM (`PRIVATE KEY`).
 */
import { constants, generateKeyPair, sign, type KeyObject } from 'node:crypto';
import { Secret } from '../core/secret.js';

/** The key types kubelet 1.35 offers (PodCertificateProjection.keyType). */
export const POD_CERTIFICATE_KEY_TYPES = ['RSA3072', 'RSA4096', 'ECDSAP256', 'ECDSAP384', 'ECDSAP521', 'ED25519'] as const;
export type PodCertificateKeyType = (typeof POD_CERTIFICATE_KEY_TYPES)[number];

export interface ProvenKey {
  /** PKCS#8 PEM. */
  readonly privateKeyPem: Secret<string>;
  /** SubjectPublicKeyInfo DER (spec.pkixPublicKey). */
  readonly spkiDer: Buffer;
  /** spec.proofOfPossession. */
  readonly proof: Buffer;
}

export function isPodCertificateKeyType(v: unknown): v is PodCertificateKeyType {
  return (POD_CERTIFICATE_KEY_TYPES as readonly unknown[]).includes(v);
}

function generate(keyType: PodCertificateKeyType): Promise<{ publicKey: KeyObject; privateKey: KeyObject }> {
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, publicKey: KeyObject, privateKey: KeyObject) => (err ? reject(err) : resolve({ publicKey, privateKey }));
    switch (keyType) {
      case 'RSA3072':
      case 'RSA4096':
        generateKeyPair('rsa', { modulusLength: keyType === 'RSA3072' ? 3072 : 4096, publicExponent: 0x10001 }, done);
        return;
      case 'ECDSAP256':
      case 'ECDSAP384':
      case 'ECDSAP521':
        generateKeyPair('ec', { namedCurve: { ECDSAP256: 'prime256v1', ECDSAP384: 'secp384r1', ECDSAP521: 'secp521r1' }[keyType] }, done);
        return;
      case 'ED25519':
        generateKeyPair('ed25519', {}, done);
    }
  });
}

/** Signs `podUid` as kubelet does for its key type. */
export function proveKey(privateKey: KeyObject, podUid: string): Buffer {
  const data = Buffer.from(podUid, 'utf8');
  switch (privateKey.asymmetricKeyType) {
    case 'ed25519':
      return sign(null, data, privateKey);
    case 'ec':
      return sign('sha256', data, { key: privateKey, dsaEncoding: 'der' });
    default:
      return sign('sha256', data, { key: privateKey, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_MAX_SIGN });
  }
}

/** A new key of `keyType` with its proof of possession for the pod `podUid`. */
export async function generateProvenKey(keyType: PodCertificateKeyType, podUid: string): Promise<ProvenKey> {
  const { publicKey, privateKey } = await generate(keyType);
  const pkcs8 = privateKey.export({ type: 'pkcs8', format: 'pem' });
  return {
    privateKeyPem: new Secret(typeof pkcs8 === 'string' ? pkcs8 : pkcs8.toString('utf8')),
    spkiDer: publicKey.export({ type: 'spki', format: 'der' }),
    proof: proveKey(privateKey, podUid),
  };
}
