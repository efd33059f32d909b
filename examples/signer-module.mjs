// A complete signer module for `certbroker ca --signer module:./examples/signer-module.mjs`.
// It signs with its own key: an ECDSA P-256 root made in memory at start (a stand-in for a key
// in an HSM or a cloud KMS, which would sign `tbs` bytes instead), issuing X509-SVIDs with
// @peculiar/x509. Plain ESM JavaScript: no build step. docs/ca.md ("Signer modules") shows this
// file; test/ca/signer-module.e2e.test.ts runs it and checks the doc and this file agree.
import 'reflect-metadata';
import { randomBytes, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' };
const DAY_MS = 86_400_000;

/** @type {{ cert: x509.X509Certificate, keys: CryptoKeyPair } | undefined} */
let ca;

/** A refusal: the caller gets PERMISSION_DENIED with this message (any Error with `refusal: true`; or `SignerRefusal` from 'certbroker'). */
function refuse(message) {
  return Object.assign(new Error(message), { refusal: true });
}

/** Positive, 16 random bytes, as hex. */
function serial() {
  const bytes = randomBytes(16);
  bytes[0] &= 0x7f;
  return bytes.toString('hex');
}

/** @type {import('certbroker').SignerModule} */
export default {
  description: 'example signer module (in-memory P-256 root)',

  async start({ log }) {
    const keys = await webcrypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']);
    const now = Date.now();
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: 'O=example signer module',
      notBefore: new Date(now - 60_000),
      notAfter: new Date(now + 365 * DAY_MS),
      keys,
      signingAlgorithm: SIGNING,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    ca = { cert, keys };
    log('info', 'example signer module ready', { root: cert.subject });
  },

  roots() {
    return ca ? [ca.cert.toString('pem')] : [];
  },

  notReadyReason() {
    return ca ? undefined : 'no root yet';
  },

  async sign(request) {
    if (!ca) throw new Error('not started');
    if (request.purpose === 'workload' && request.spiffeId.includes('/ns/kube-system/')) throw refuse('this signer does not issue kube-system identities');
    const now = Date.now();
    const names = [
      ...request.dnsNames.map((value) => ({ type: 'dns', value })),
      ...request.ipAddresses.map((value) => ({ type: 'ip', value })),
      ...(request.spiffeId ? [{ type: 'url', value: request.spiffeId }] : []),
    ];
    const leaf = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: '', // X509-SVIDs name the workload in the URI SAN only
      issuer: ca.cert.subjectName,
      notBefore: new Date(now - 120_000),
      // Never past the root.
      notAfter: new Date(Math.min(now + request.ttlSeconds * 1000, ca.cert.notAfter.getTime())),
      publicKey: request.spkiDer,
      signingKey: ca.keys.privateKey,
      signingAlgorithm: SIGNING,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]),
        await x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey),
        new x509.SubjectAlternativeNameExtension(names, true), // critical: the subject is empty
      ],
    });
    if (request.signal.aborted) throw request.signal.reason; // the CA stopped waiting
    return { leaf: leaf.toString('pem'), roots: [ca.cert.toString('pem')] };
  },

  close() {
    ca = undefined;
  },
};
