/**
 * The cheap check of an Istio CA answer a relay passes on (a CSR it did not make, one call per
 * request, so it must be cheap): the answer is leaf, intermediates, root bundle last; the leaf
 * element holds one certificate carrying exactly one URI SAN, the identity asked for; it is not
 * a CA; it is signed by the next certificate (the first intermediate, or a root of the bundle).
 * The leaf is read with the minimal DER reader (`leafFacts`) and its signature checked with
 * node:crypto against the issuers' keys, kept from recent answers (a CA answers with the same
 * tail every time): the full X509-SVID rules on @peculiar/x509 cost ~1.5 ms per answer. Users:
 * the node broker's Istio CA front (broker/adapters/forwarded-chain.ts) and the CA's
 * `istio-upstream` signer, each turning the ERR_PKI_ANSWER_* codes into its own.
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { PkiError } from './errors.js';
import { leafFacts, verifyLeafSignature, type LeafFacts } from './leaf-facts.js';
import { parsePem } from './pem.js';

/** Issuer keys by the PEM text of their element (one or two per CA; bounded against a CA that changes every answer). */
const issuers = new Map<string, readonly KeyObject[]>();
const MAX_ISSUERS = 16;

/** The public keys of every certificate in a PEM element (cached by its text). */
export function elementKeys(pem: string): readonly KeyObject[] {
  let hit = issuers.get(pem);
  if (hit) return hit;
  hit = parsePem(pem)
    .filter((b) => b.type === 'CERTIFICATE')
    .map((b) => new X509Certificate(Buffer.from(b.der)).publicKey);
  if (issuers.size >= MAX_ISSUERS) issuers.clear();
  issuers.set(pem, hit);
  return hit;
}

export interface AnswerChain {
  /** The `cert_chain` as it came. */
  readonly certChain: readonly string[];
  /** What the leaf says (its SPKI, serial, validity, ...). */
  readonly leaf: LeafFacts;
}

/**
 * Throws a PkiError unless `chain` is usable for `identity`: ERR_PKI_ANSWER_INVALID (too short,
 * not PEM certificates, not signed by the next certificate), ERR_PKI_ANSWER_SAN_MISMATCH (URI
 * SANs other than exactly `identity`), ERR_PKI_ANSWER_LEAF_CA (basicConstraints CA:TRUE).
 */
export function checkAnswerChain(chain: readonly string[], identity: string): AnswerChain {
  const bad = (why: string, cause?: unknown) => new PkiError('ERR_PKI_ANSWER_INVALID', why, cause);
  if (chain.length < 2) throw bad(`cert_chain has ${chain.length} element(s), want leaf ... root`);
  let leaf: LeafFacts;
  let next: readonly KeyObject[];
  try {
    const blocks = parsePem(chain[0]!).filter((b) => b.type === 'CERTIFICATE');
    if (blocks.length !== 1) throw new Error(`${blocks.length} certificates in the leaf element`);
    leaf = leafFacts(blocks[0]!.der);
    next = elementKeys(chain[1]!);
    if (next.length === 0) throw new Error('no certificate after the leaf');
  } catch (err) {
    throw bad('a cert_chain element is not a PEM certificate', err);
  }
  if (leaf.uriSans.length !== 1 || leaf.uriSans[0] !== identity) {
    throw new PkiError('ERR_PKI_ANSWER_SAN_MISMATCH', `leaf with URI SANs ${JSON.stringify(leaf.uriSans)} for requested identity ${identity}`);
  }
  if (leaf.isCa) throw new PkiError('ERR_PKI_ANSWER_LEAF_CA', `leaf for ${identity} has basicConstraints CA:TRUE`);
  // An intermediate signs the leaf; with none (the root bundle follows the leaf), one of the roots does.
  const signers = chain.length > 2 ? next.slice(0, 1) : next;
  if (!signers.some((k) => verifyLeafSignature(leaf, k))) throw bad('the leaf is not signed by the next certificate');
  return { certChain: chain, leaf };
}
