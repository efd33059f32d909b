/**
 * What a signer module returned, checked before the CA answers with it: PEM or DER read into
 * certificates (the leaf exactly one), then issued-chain.ts — leaf, intermediates and roots form
 * a path valid now, the leaf holds the request's key and every requested DNS/IP name, and for a
 * workload it is an X509-SVID whose one URI SAN is the identity asked for. Anything else is
 * ERR_CA_MODULE_BAD_RESULT. A module answers rarely enough (once per workload
 * per rotation) that the full checks on @peculiar/x509 are affordable.
 */
import { certificateToPem, parsePem } from '../../pki/pem.js';
import { parseCertificate, type x509 } from '../../pki/x509-lib.js';
import { CaError } from '../errors.js';
import type { CertificateData, SignerModuleRequest, SignerModuleResult } from '../signer-module.js';
import type { SignedChain } from '../signer.js';
import { checkIssuedChain, parseCaCertificate } from './issued-chain.js';

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

function parseAll(ders: readonly Buffer[], what: string, parse: (der: Buffer) => x509.X509Certificate = (d) => parseCertificate(new Uint8Array(d))): x509.X509Certificate[] {
  try {
    return ders.map(parse);
  } catch (err) {
    throw badResult(`${what} does not parse`, err);
  }
}

/** Throws ERR_CA_MODULE_BAD_RESULT unless `result` certifies `request`; the answer (leaf, intermediates, root bundle last) otherwise. */
export function checkModuleResult(result: SignerModuleResult, request: SignerModuleRequest, nowMs: number): SignedChain {
  if (typeof result !== 'object' || result === null) throw badResult('sign() resolved to no result object');
  const leafDers = certificateDers(result.leaf, 'leaf');
  if (leafDers.length !== 1) throw badResult(`leaf holds ${leafDers.length} certificates`);
  const interDers = (result.intermediates ?? []).flatMap((d, i) => certificateDers(d, `intermediates[${i}]`));
  if (!Array.isArray(result.roots) || result.roots.length === 0) throw badResult('no roots');
  const rootDers = result.roots.flatMap((d, i) => certificateDers(d, `roots[${i}]`));
  const chain = {
    leaf: parseAll(leafDers, 'the leaf')[0]!,
    intermediates: parseAll(interDers, 'an intermediate', parseCaCertificate),
    roots: parseAll(rootDers, 'a root', parseCaCertificate),
    rootsPem: rootDers.map((d) => certificateToPem(d)).join(''),
  };
  const workload = request.purpose === 'workload';
  const want = { spki: request.spkiDer, spiffeId: workload ? request.spiffeId : undefined, names: [...request.dnsNames, ...request.ipAddresses], svid: workload };
  return checkIssuedChain(chain, want, nowMs, badResult);
}
