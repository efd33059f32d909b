/**
 * The `istio-upstream` signer's checks of what the upstream answered, before anything is
 * returned to the caller: pki's cheap `checkAnswerChain` (one URI SAN = the identity asked for,
 * not a CA, signed by the next certificate), the leaf's key is the CSR's, it is not expired, and
 * it chains to the upstream roots (`AnchoredTails`: the intermediates verified once, then
 * remembered). Anything else is ERR_CA_UPSTREAM_BAD_RESPONSE (UNAVAILABLE: try again later).
 */
import { X509Certificate, type KeyObject } from 'node:crypto';
import { CertbrokerError, describeError } from '../../core/errors.js';
import type { IstioCaAnswer } from '../../grpc/istio-ca-channel.js';
import type { AnchoredTails } from '../../pki/anchored-tails.js';
import { checkAnswerChain } from '../../pki/answer-chain.js';
import { exportSpkiDer } from '../../pki/keys.js';
import type { LeafFacts } from '../../pki/leaf-facts.js';
import { uriSans, missingServingNames } from '../../pki/x509-fields.js';
import { SERVING_NAMES_KEY } from '../../protocol/istio-ca.js';
import { CaError } from '../errors.js';

function badAnswer(why: string, cause?: unknown): CaError {
  return new CaError('ERR_CA_UPSTREAM_BAD_RESPONSE', `upstream CA answer refused: ${why}`, {
    status: 'unavailable',
    cause,
    publicMessage: 'upstream CA answered with an unusable certificate',
  });
}

export interface WorkloadAnswerExpectation {
  readonly identity: string;
  /** SubjectPublicKeyInfo DER of the CSR that was forwarded. */
  readonly spki: Buffer;
  readonly tails: AnchoredTails;
  readonly nowMs: number;
}

/** The leaf's facts when `answer` is a certificate for the expected identity and key that chains to the upstream roots. */
export function checkWorkloadAnswer(answer: IstioCaAnswer, want: WorkloadAnswerExpectation): LeafFacts {
  let leaf: LeafFacts;
  try {
    leaf = checkAnswerChain(answer.cert_chain ?? [], want.identity).leaf;
  } catch (err) {
    throw badAnswer(err instanceof CertbrokerError ? `${err.code}: ${err.message}` : describeError(err), err);
  }
  if (!leaf.spki.equals(want.spki)) throw badAnswer(`the leaf for ${want.identity} does not hold the CSR's key`);
  if (leaf.notAfterMs <= want.nowMs) throw badAnswer(`the leaf for ${want.identity} expired at ${new Date(leaf.notAfterMs).toISOString()}`);
  anchor(answer.cert_chain ?? [], leaf, want);
  return leaf;
}

export interface ServingAnswerExpectation {
  readonly privateKey: KeyObject;
  readonly dnsNames: readonly string[];
  readonly tails: AnchoredTails;
  readonly nowMs: number;
}

/**
 * For the CA's own serving certificate: the leaf holds our key and every one of `dnsNames`
 * (DNS or IP SANs), chains to the upstream roots. Returns the chain without the root bundle.
 */
export function checkServingAnswer(answer: IstioCaAnswer, want: ServingAnswerExpectation): { certChain: readonly string[]; notAfterMs: number } {
  const chain = answer.cert_chain ?? [];
  let leaf: X509Certificate;
  let identity: string;
  let facts: LeafFacts;
  try {
    leaf = new X509Certificate(chain[0] ?? '');
    identity = uriSans(leaf)[0] ?? '';
    facts = checkAnswerChain(chain, identity).leaf;
  } catch (err) {
    throw badAnswer(`serving certificate: ${describeError(err)}`, err);
  }
  if (!facts.spki.equals(exportSpkiDer(want.privateKey))) throw badAnswer('the serving certificate does not hold the requested key');
  const missing = missingServingNames(leaf, want.dnsNames);
  if (missing.length > 0) {
    throw badAnswer(`the serving certificate (${identity}) lacks ${JSON.stringify(missing)}: the upstream must grant them (certbroker: CA_GRANTABLE_SERVING_NAMES and a trusted node account; istiod ignores ${SERVING_NAMES_KEY})`);
  }
  if (facts.notAfterMs <= want.nowMs) throw badAnswer('the serving certificate is expired');
  anchor(chain, facts, want);
  return { certChain: chain.slice(0, -1), notAfterMs: facts.notAfterMs };
}

function anchor(chain: readonly string[], leaf: LeafFacts, want: { readonly tails: AnchoredTails; readonly nowMs: number }): void {
  try {
    want.tails.check(chain, leaf, want.nowMs);
  } catch (err) {
    throw badAnswer(`it does not chain to the upstream roots (${err instanceof CertbrokerError ? err.code : describeError(err)})`, err);
  }
}
