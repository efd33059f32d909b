/**
 * What a signer module returned, checked before the CA answers with it: the leaf is one
 * certificate holding the request's key and every requested DNS/IP name; for a workload it is an
 * X509-SVID (the SPIFFE rules: one URI SAN, CA:FALSE, keyUsage ...) whose one URI SAN is the
 * identity asked for; leaf, intermediates and roots form a path valid now (pki's `verifyChain`).
 * Anything else is ERR_CA_MODULE_BAD_RESULT. A module answers rarely enough (once per workload
 * per rotation) that the full checks on @peculiar/x509 are affordable.
 */
import { X509Certificate } from 'node:crypto';
import { describeError } from '../../core/errors.js';
import { verifyChain } from '../../pki/chain.js';
import { parsePem, pemEncode } from '../../pki/pem.js';
import { missingServingNames, uriSans } from '../../pki/x509-fields.js';
import { parseCertificate } from '../../pki/x509-lib.js';
import { x509SvidProblems } from '../../spiffe/x509-svid.js';
import { CaError } from '../errors.js';
import type { CertificateData, SignerModuleRequest, SignerModuleResult } from '../signer-module.js';

export function badResult(why: string, cause?: unknown): CaError {
  return new CaError('ERR_CA_MODULE_BAD_RESULT', `signer module result refused: ${why}`, {
    status: 'internal',
    cause,
    publicMessage: 'signer module returned an unusable certificate',
  });
}

/** DER of every certificate in `data` (PEM text with one or more CERTIFICATE blocks, or DER bytes). */
export function certificateDers(data: CertificateData, what: string): Buffer[] {
  if (typeof data !== 'string' && !(data instanceof Uint8Array)) throw badResult(`${what} is neither PEM text nor DER bytes`);
  const isDer = typeof data !== 'string' && data.length > 0 && data[0] === 0x30;
  if (isDer) return [Buffer.from(data)];
  let ders: Buffer[];
  try {
    ders = parsePem(data)
      .filter((b) => b.type === 'CERTIFICATE')
      .map((b) => Buffer.from(b.der));
  } catch (err) {
    throw badResult(`${what} is not PEM or DER`, err);
  }
  if (ders.length === 0) throw badResult(`${what} holds no certificate`);
  return ders;
}

export interface CheckedModuleChain {
  /** The answer: leaf, intermediates one per element, the root bundle last. */
  readonly certChain: readonly string[];
  readonly serialHex: string;
  readonly notAfterMs: number;
}

function parseAll(ders: readonly Buffer[], what: string): ReturnType<typeof parseCertificate>[] {
  try {
    return ders.map((d) => parseCertificate(new Uint8Array(d)));
  } catch (err) {
    throw badResult(`${what} does not parse`, err);
  }
}

/** Throws ERR_CA_MODULE_BAD_RESULT unless `result` certifies `request`; the answer's elements otherwise. */
export function checkModuleResult(result: SignerModuleResult, request: SignerModuleRequest, nowMs: number): CheckedModuleChain {
  if (typeof result !== 'object' || result === null) throw badResult('sign() resolved to no result object');
  const leafDers = certificateDers(result.leaf, 'leaf');
  if (leafDers.length !== 1) throw badResult(`leaf holds ${leafDers.length} certificates`);
  const interDers = (result.intermediates ?? []).flatMap((d, i) => certificateDers(d, `intermediates[${i}]`));
  if (!Array.isArray(result.roots) || result.roots.length === 0) throw badResult('no roots');
  const rootDers = result.roots.flatMap((d, i) => certificateDers(d, `roots[${i}]`));
  const leafDer = leafDers[0]!;
  let leaf: X509Certificate;
  try {
    leaf = new X509Certificate(leafDer);
  } catch (err) {
    throw badResult('the leaf does not parse', err);
  }
  if (!Buffer.from(leaf.publicKey.export({ type: 'spki', format: 'der' })).equals(Buffer.from(request.spkiDer))) {
    throw badResult('the leaf does not hold the requested key');
  }
  if (request.purpose === 'workload') {
    const uris = uriSans(leaf);
    if (uris.length !== 1 || uris[0] !== request.spiffeId) throw badResult(`the leaf has URI SANs ${JSON.stringify(uris)}, asked ${request.spiffeId}`);
    const { problems } = x509SvidProblems(leafDer, { role: 'leaf' });
    if (problems.length > 0) throw badResult(`the leaf is not an X509-SVID: ${problems.map((p) => p.code).join(', ')}`);
  } else if (leaf.ca) {
    throw badResult('the serving leaf is a CA');
  }
  const missing = missingServingNames(leaf, [...request.dnsNames, ...request.ipAddresses]);
  if (missing.length > 0) throw badResult(`the leaf lacks the names ${JSON.stringify(missing)}`);
  try {
    verifyChain({ leaf: parseAll(leafDers, 'leaf')[0]!, intermediates: parseAll(interDers, 'an intermediate'), roots: parseAll(rootDers, 'a root'), nowMs });
  } catch (err) {
    throw badResult(`leaf, intermediates and roots do not form a valid path (${describeError(err)})`, err);
  }
  const pem = (d: Buffer) => pemEncode('CERTIFICATE', d);
  return {
    certChain: [pem(leafDer), ...interDers.map(pem), rootDers.map(pem).join('')],
    serialHex: leaf.serialNumber.toLowerCase(),
    notAfterMs: Date.parse(leaf.validTo),
  };
}
