/**
 * The check of a CA answer the Istio CA front relays (a CSR it did not make, one call per
 * ztunnel request, so it must be cheap): the answer is leaf, intermediates, root bundle last; the
 * leaf carries exactly one URI SAN, the identity asked for; it is not a CA; it is signed by the
 * next certificate (the first intermediate, or a root of the bundle). The leaf is read with the
 * minimal DER reader (`leafFacts`) and its signature checked with node:crypto against the issuers'
 * keys, kept from recent answers (a CA answers with the same tail every time): the full X509-SVID
 * rules of `parseCaResponse` cost ~1.5 ms per answer on @peculiar/x509 — more than the rest of the
 * front together — and guard the broker's own cache, whose keys it hands out. The leaf's SPKI goes
 * back so the front compares it with the CSR's.
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { leafFacts, verifyLeafSignature, type LeafFacts } from '../../pki/leaf-facts.js';
import { parsePem } from '../../pki/pem.js';
import type { IstioCertificateResponse } from '../../protocol/istio-ca.js';
import { BrokerError } from '../errors.js';

/** Issuer keys by the PEM text of their element (one or two per CA; bounded against a CA that changes every answer). */
const issuers = new Map<string, readonly KeyObject[]>();
const MAX_ISSUERS = 16;

function keysOf(pem: string): readonly KeyObject[] {
  let hit = issuers.get(pem);
  if (hit) return hit;
  hit = parsePem(pem)
    .filter((b) => b.type === 'CERTIFICATE')
    .map((b) => new X509Certificate(Buffer.from(b.der)).publicKey);
  if (issuers.size >= MAX_ISSUERS) issuers.clear();
  issuers.set(pem, hit);
  return hit;
}

export interface ForwardedChain {
  /** The CA's `cert_chain`, as it came. */
  readonly certChain: readonly string[];
  /** SubjectPublicKeyInfo DER of the leaf. */
  readonly leafSpki: Buffer;
}

/** Throws ERR_CA_BAD_RESPONSE / ERR_CA_SAN_MISMATCH / ERR_CA_LEAF_NOT_SVID unless the answer is usable for `identity`. */
export function checkForwardedChain(response: Partial<IstioCertificateResponse>, identity: string): ForwardedChain {
  const chain = response.cert_chain ?? [];
  const bad = (why: string, cause?: unknown) => new BrokerError('ERR_CA_BAD_RESPONSE', `CA response for ${identity}: ${why}`, { status: 'unavailable', cause });
  if (chain.length < 2) throw bad(`cert_chain has ${chain.length} element(s), want leaf ... root`);
  let leaf: LeafFacts;
  let next: readonly KeyObject[];
  try {
    const blocks = parsePem(chain[0]!).filter((b) => b.type === 'CERTIFICATE');
    if (blocks.length !== 1) throw new Error(`${blocks.length} certificates in the leaf element`);
    leaf = leafFacts(blocks[0]!.der);
    next = keysOf(chain[1]!);
    if (next.length === 0) throw new Error('no certificate after the leaf');
  } catch (err) {
    throw bad('a cert_chain element is not a PEM certificate', err);
  }
  if (leaf.uriSans.length !== 1 || leaf.uriSans[0] !== identity) {
    throw new BrokerError('ERR_CA_SAN_MISMATCH', `CA returned a leaf with URI SANs ${JSON.stringify(leaf.uriSans)} for requested identity ${identity}`, { status: 'unavailable' });
  }
  if (leaf.isCa) throw new BrokerError('ERR_CA_LEAF_NOT_SVID', `CA returned a leaf for ${identity} with basicConstraints CA:TRUE`, { status: 'unavailable' });
  // An intermediate signs the leaf; with none (the root bundle follows the leaf), one of the roots does.
  const signers = chain.length > 2 ? next.slice(0, 1) : next;
  if (!signers.some((k) => verifyLeafSignature(leaf, k))) throw bad('the leaf is not signed by the next certificate');
  return { certChain: chain, leafSpki: Buffer.from(leaf.spki) };
}
