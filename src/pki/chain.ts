/**
 * Chain assembly and verification: from a leaf, through intermediates (any order), up to one
 * of the trusted roots. Each link: issuer Name bytes equal, signature verifies (node:crypto),
 * the issuer is a CA (basicConstraints cA, keyCertSign when keyUsage is present), its
 * pathLenConstraint holds, and every certificate on the path is valid at `nowMs`.
 */
import { X509Certificate as NodeX509 } from 'node:crypto';
import { certificateFields } from './cert-fields.js';
import { PkiError } from './errors.js';
import { parsePemBlocksOfType } from './pem.js';
import { parseCertificate, x509 } from './x509-lib.js';

/** Every CERTIFICATE block of a PEM text, parsed; any other block type is an error. */
export function parseCertificates(pem: string | Uint8Array, what = 'certificate'): x509.X509Certificate[] {
  return parsePemBlocksOfType(pem, 'CERTIFICATE', what).map((der) => parseCertificate(new Uint8Array(der)));
}

export interface VerifyChainInput {
  readonly leaf: x509.X509Certificate;
  readonly intermediates?: readonly x509.X509Certificate[];
  readonly roots: readonly x509.X509Certificate[];
  readonly nowMs: number;
  /**
   * The "leaf" is itself a CA that will sign leaves (validating a signing cert): it then counts
   * against its issuers' pathLenConstraint.
   */
  readonly leafIsCa?: boolean;
  /** Max certificates on a path including leaf and root (default 10). */
  readonly maxDepth?: number;
}

interface Node {
  readonly cert: x509.X509Certificate;
  readonly der: Buffer;
  readonly issuerDer: Buffer;
  readonly subjectDer: Buffer;
  readonly node: NodeX509;
}

/**
 * Nodes by certificate object: a caller that verifies against the same roots and intermediates
 * every time (a CA checking an external signer's answers) builds their node:crypto certificates
 * once (~1 ms each on a busy core), not per call. Weak: it lives as long as the caller's objects.
 */
const nodes = new WeakMap<x509.X509Certificate, Node>();

function toNode(cert: x509.X509Certificate): Node {
  const known = nodes.get(cert);
  if (known) return known;
  const der = Buffer.from(cert.rawData);
  const f = certificateFields(der);
  const node: Node = { cert, der, issuerDer: Buffer.from(f.issuerDer), subjectDer: Buffer.from(f.subjectDer), node: new NodeX509(der) };
  nodes.set(cert, node);
  return node;
}

function describe(cert: x509.X509Certificate): string {
  return `${cert.subject || '(empty subject)'} [serial ${cert.serialNumber}]`;
}

function checkValidity(n: Node, nowMs: number): void {
  if (nowMs < n.cert.notBefore.getTime() || nowMs > n.cert.notAfter.getTime()) {
    throw new PkiError('ERR_PKI_CHAIN_EXPIRED', `certificate ${describe(n.cert)} is not valid at ${new Date(nowMs).toISOString()}`);
  }
}

function checkIssuerIsCa(n: Node, caCertsBelow: number): void {
  const bc = n.cert.getExtension(x509.BasicConstraintsExtension);
  if (!bc || !bc.ca) throw new PkiError('ERR_PKI_CHAIN_NOT_CA', `issuer ${describe(n.cert)} is not a CA (basicConstraints)`);
  const ku = n.cert.getExtension(x509.KeyUsagesExtension);
  if (ku && !(ku.usages & x509.KeyUsageFlags.keyCertSign)) {
    throw new PkiError('ERR_PKI_CHAIN_NOT_CA', `issuer ${describe(n.cert)} lacks keyCertSign`);
  }
  if (bc.pathLength !== undefined && caCertsBelow > bc.pathLength) {
    throw new PkiError('ERR_PKI_CHAIN_PATHLEN', `issuer ${describe(n.cert)} has pathLen ${bc.pathLength}, ${caCertsBelow} CA certs below it`);
  }
}

/**
 * Verifies and returns the ordered path [leaf, intermediates..., root]. Errors:
 * ERR_PKI_CHAIN_EMPTY (no roots), ERR_PKI_CHAIN_BROKEN (no issuer found),
 * ERR_PKI_CHAIN_SIGNATURE, ERR_PKI_CHAIN_EXPIRED, ERR_PKI_CHAIN_NOT_CA, ERR_PKI_CHAIN_PATHLEN,
 * ERR_PKI_CHAIN_UNTRUSTED (the path ends at a self-signed cert that is not a trusted root).
 */
export function verifyChain(input: VerifyChainInput): x509.X509Certificate[] {
  if (input.roots.length === 0) throw new PkiError('ERR_PKI_CHAIN_EMPTY', 'no trusted roots given');
  const maxDepth = input.maxDepth ?? 10;
  const roots = input.roots.map(toNode);
  const inters = (input.intermediates ?? []).map(toNode);
  const path: Node[] = [toNode(input.leaf)];
  checkValidity(path[0]!, input.nowMs);
  let caCertsBelow = 0;
  for (;;) {
    const current = path[path.length - 1]!;
    if (roots.some((r) => r.der.equals(current.der))) break;
    if (path.length >= maxDepth) throw new PkiError('ERR_PKI_CHAIN_BROKEN', `no root within ${maxDepth} certificates`);
    const candidates = [...roots, ...inters].filter(
      (c) => c.subjectDer.equals(current.issuerDer) && !path.some((p) => p.der.equals(c.der)),
    );
    if (candidates.length === 0) {
      if (current.subjectDer.equals(current.issuerDer) && current.node.verify(current.node.publicKey)) {
        throw new PkiError('ERR_PKI_CHAIN_UNTRUSTED', `chain ends at ${describe(current.cert)}, which is not a trusted root`);
      }
      throw new PkiError('ERR_PKI_CHAIN_BROKEN', `no issuer found for ${describe(current.cert)}`);
    }
    const issuer = candidates.find((c) => current.node.verify(c.node.publicKey));
    if (!issuer) throw new PkiError('ERR_PKI_CHAIN_SIGNATURE', `signature of ${describe(current.cert)} does not verify with its issuer`);
    if (path.length > 1 || input.leafIsCa === true) caCertsBelow++;
    checkIssuerIsCa(issuer, caCertsBelow);
    checkValidity(issuer, input.nowMs);
    path.push(issuer);
  }
  return path.map((n) => n.cert);
}

export interface ResponseChain {
  readonly leaf: x509.X509Certificate;
  /** Between the leaf and the roots, nearest first. */
  readonly intermediates: readonly x509.X509Certificate[];
  /** The last element of the response (may hold several roots during a rotation). */
  readonly roots: readonly x509.X509Certificate[];
}

/**
 * Splits an `IstioCertificateResponse.cert_chain` (leaf first, one intermediate per element,
 * the root bundle last) into parsed certificates and verifies the leaf up to one of the roots at
 * `nowMs`. A response of one element (leaf only) is ERR_PKI_CHAIN_EMPTY.
 */
export function parseResponseChain(certChain: readonly string[], nowMs: number): ResponseChain {
  if (certChain.length < 2) throw new PkiError('ERR_PKI_CHAIN_EMPTY', `certificate chain has ${certChain.length} element(s); want the leaf and the roots at least`);
  const leaves = parseCertificates(certChain[0]!, 'leaf certificate');
  if (leaves.length !== 1) throw new PkiError('ERR_PKI_CERT_INVALID', `the first chain element must hold one certificate, found ${leaves.length}`);
  const intermediates = certChain.slice(1, -1).flatMap((pem) => parseCertificates(pem, 'intermediate certificate'));
  const roots = parseCertificates(certChain[certChain.length - 1]!, 'root certificate');
  const leaf = leaves[0]!;
  verifyChain({ leaf, intermediates, roots, nowMs });
  return { leaf, intermediates, roots };
}

/**
 * Which of `rootsDer` the DER chain (leaf first, then intermediates, roots left out) reaches —
 * its index — or -1 when it reaches none of them (`verifyChain`'s rules). Checked at `nowMs`,
 * by default at the latest notBefore of all the certificates given (the moment all of them were
 * valid, for a chain still in use), so the answer does not depend on the caller's clock (expiry
 * is the caller's own business) nor on a root made moments before the leaf without backdating.
 */
export function chainAnchor(chainDer: readonly Uint8Array[], rootsDer: readonly Uint8Array[], nowMs?: number): number {
  if (chainDer.length === 0 || rootsDer.length === 0) return -1;
  try {
    const chain = chainDer.map((d) => parseCertificate(new Uint8Array(d)));
    const roots = rootsDer.map((d) => parseCertificate(new Uint8Array(d)));
    const at = nowMs ?? Math.max(...[...chain, ...roots].map((c) => c.notBefore.getTime()));
    const path = verifyChain({ leaf: chain[0]!, intermediates: chain.slice(1), roots, nowMs: at });
    const top = Buffer.from(path[path.length - 1]!.rawData);
    return rootsDer.findIndex((r) => top.equals(Buffer.from(r)));
  } catch {
    return -1; // unparseable, broken, untrusted: reaches none of them
  }
}
