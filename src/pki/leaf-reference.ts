/**
 * The reference leaf builder: the same istiod profile built through @peculiar/x509's
 * generic ASN.1 path and signed through WebCrypto. Slow (~250/s); it exists so the fast
 * template can be proven byte-identical (TBSCertificate) against an independent encoder.
 */
import { webCryptoAlgorithmForKey } from './algorithms.js';
import { certificateFields } from './cert-fields.js';
import type { LeafSigner } from './leaf-template.js';
import type { LeafPlan } from './profile.js';
import { toSigningCryptoKey, x509 } from './x509-lib.js';

export interface ReferenceLeafInput {
  readonly plan: LeafPlan;
  readonly spki: Buffer;
  readonly uri: string;
  readonly signer: LeafSigner;
}

export interface ReferenceLeaf {
  readonly der: Buffer;
  readonly tbs: Buffer;
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
  extensions.push(new x509.SubjectAlternativeNameExtension([{ type: 'url', value: input.uri }], true));
  const alg = webCryptoAlgorithmForKey(signer.keySpec);
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: plan.serial.toString('hex'),
    issuer: new x509.Name(new Uint8Array(signer.subjectDer)),
    notBefore: new Date(plan.notBeforeMs),
    notAfter: new Date(plan.notAfterMs),
    publicKey: new Uint8Array(input.spki),
    signingKey: await toSigningCryptoKey(signer.privateKey),
    signingAlgorithm: { name: alg.name, hash: alg.hash },
    extensions,
  });
  const der = Buffer.from(cert.rawData);
  return { der, tbs: Buffer.from(certificateFields(der).tbs) };
}
