/**
 * The reference leaf builder: the same istiod profile built through @peculiar/x509's
 * generic ASN.1 path and signed through WebCrypto. Slow (~250/s); it exists so the fast
 * template can be proven byte-identical (TBSCertificate) against an independent encoder.
 */
import { webCryptoAlgorithmForKey } from './algorithms.js';
import { certificateFields } from './cert-fields.js';
import type { LeafSigner } from './leaf-template.js';
import { PkiError } from './errors.js';
import { pemEncode } from './pem.js';
import { planLeaf, type LeafPlan } from './profile.js';
import { servingNamesByKind } from './serving-names.js';
import { parseSpiffeId } from '../spiffe/id.js';
import type { KeyObject } from 'node:crypto';
import { toSigningCryptoKey, x509, type SigningCryptoKey } from './x509-lib.js';

export interface ReferenceLeafInput {
  readonly plan: LeafPlan;
  readonly spki: Buffer;
  readonly uri: string;
  readonly signer: LeafSigner;
  /** DNS names and IP literals certified before the URI (serving-names.ts). */
  readonly servingNames?: readonly string[];
}

export interface ReferenceLeaf {
  readonly der: Buffer;
  readonly tbs: Buffer;
}

/** WebCrypto keys per signer KeyObject, imported once (a per-call import would dominate). */
const signingKeys = new WeakMap<KeyObject, Promise<SigningCryptoKey>>();

function signingKeyFor(privateKey: KeyObject): Promise<SigningCryptoKey> {
  let k = signingKeys.get(privateKey);
  if (!k) {
    k = toSigningCryptoKey(privateKey);
    signingKeys.set(privateKey, k);
  }
  return k;
}

export async function buildLeafReference(input: ReferenceLeafInput): Promise<ReferenceLeaf> {
  const { plan, signer } = input;
  const extensions: x509.Extension[] = [
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth], false),
    new x509.BasicConstraintsExtension(false, undefined, true),
  ];
  if (signer.subjectKeyId && signer.subjectKeyId.length > 0) {
    extensions.push(new x509.AuthorityKeyIdentifierExtension(signer.subjectKeyId.toString('hex'), false));
  }
  const { dns, ips } = servingNamesByKind(input.servingNames ?? []);
  extensions.push(
    new x509.SubjectAlternativeNameExtension(
      [...dns.map((value) => ({ type: 'dns' as const, value })), ...ips.map((value) => ({ type: 'ip' as const, value })), { type: 'url', value: input.uri }],
      true,
    ),
  );
  const alg = webCryptoAlgorithmForKey(signer.keySpec);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: plan.serial.toString('hex'),
    issuer: new x509.Name(new Uint8Array(signer.subjectDer)),
    notBefore: new Date(plan.notBeforeMs),
    notAfter: new Date(plan.notAfterMs),
    publicKey: new Uint8Array(input.spki),
    signingKey: await signingKeyFor(signer.privateKey),
    signingAlgorithm: { name: alg.name, hash: alg.hash },
    extensions,
  });
  const der = Buffer.from(cert.rawData);
  return { der, tbs: Buffer.from(certificateFields(der).tbs) };
}

export interface ReferenceIssueInput {
  readonly csr: string | Uint8Array;
  readonly spiffeId: string;
  readonly ttlSeconds: number;
  readonly signer: LeafSigner;
  readonly nowMs: number;
}

/**
 * The whole job on the generic path: @peculiar/x509 CSR parse + WebCrypto verify, reference
 * leaf build + sign, PEM. What the fast path is measured against in bench/pki-issue.bench.ts.
 */
export async function issueLeafReference(input: ReferenceIssueInput): Promise<{ readonly pem: string; readonly der: Buffer }> {
  parseSpiffeId(input.spiffeId);
  let req: x509.Pkcs10CertificateRequest;
  try {
    req = new x509.Pkcs10CertificateRequest(typeof input.csr === 'string' ? input.csr : new Uint8Array(input.csr));
  } catch (err) {
    throw new PkiError('ERR_PKI_CSR_MALFORMED', 'malformed CSR', err);
  }
  if (!(await req.verify())) throw new PkiError('ERR_PKI_CSR_SIGNATURE_INVALID', 'CSR signature does not verify');
  const plan = planLeaf({ nowMs: input.nowMs, ttlSeconds: input.ttlSeconds, signerNotAfterMs: input.signer.notAfterMs });
  const { der } = await buildLeafReference({ plan, spki: Buffer.from(req.publicKey.rawData), uri: input.spiffeId, signer: input.signer });
  return { der, pem: pemEncode('CERTIFICATE', der) };
}
