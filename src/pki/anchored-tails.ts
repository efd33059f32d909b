/**
 * Does a CA answer's leaf chain to roots we trust? For a relay that checks every answer (the
 * CA's `istio-upstream` signer): the tail after the leaf (the intermediates) is the same in every
 * answer, so a tail verified once with `verifyChain` (signatures, CA flags, path lengths,
 * validity) is remembered until its first certificate expires; per answer only the leaf's
 * signature is checked (by `checkAnswerChain`, against the first intermediate), or — with no
 * intermediate — checked here against the trusted roots' keys.
 */
import { X509Certificate as NodeX509, type KeyObject } from 'node:crypto';
import { parseCertificates, verifyChain } from './chain.js';
import { PkiError } from './errors.js';
import { verifyLeafSignature, type LeafFacts } from './leaf-facts.js';
import type { x509 } from './x509-lib.js';

const MAX_TAILS = 16;

interface TrustedRoot {
  readonly key: KeyObject;
  readonly notBeforeMs: number;
  readonly notAfterMs: number;
}

export class AnchoredTails {
  readonly #roots: x509.X509Certificate[];
  readonly #rootKeys: readonly TrustedRoot[];
  /** Verified tails (the intermediates' PEM texts joined) -> the instant their path stops being valid. */
  readonly #verified = new Map<string, number>();

  /** `rootsPem`: one or more PEM roots (ERR_PKI_* when it holds none or something else). */
  constructor(rootsPem: string) {
    this.#roots = parseCertificates(rootsPem, 'trusted root');
    if (this.#roots.length === 0) throw new PkiError('ERR_PKI_CHAIN_EMPTY', 'no trusted roots given');
    this.#rootKeys = this.#roots.map((r) => ({ key: new NodeX509(Buffer.from(r.rawData)).publicKey, notBeforeMs: r.notBefore.getTime(), notAfterMs: r.notAfter.getTime() }));
  }

  /**
   * Throws a PkiError (ERR_PKI_CHAIN_*) unless `leaf`, the first element of `chain` (leaf,
   * intermediates one per element, root bundle last), reaches a trusted root at `nowMs`. The
   * leaf's signature by the first intermediate is the caller's check (`checkAnswerChain`).
   */
  check(chain: readonly string[], leaf: LeafFacts, nowMs: number): void {
    const intermediates = chain.slice(1, -1);
    if (intermediates.length === 0) {
      const valid = this.#rootKeys.filter((r) => r.notBeforeMs <= nowMs && nowMs <= r.notAfterMs);
      if (!valid.some((r) => verifyLeafSignature(leaf, r.key))) throw new PkiError('ERR_PKI_CHAIN_UNTRUSTED', 'the leaf is not signed by a trusted root valid now');
      return;
    }
    const key = intermediates.join('');
    const until = this.#verified.get(key);
    if (until !== undefined && nowMs <= until) return;
    const certs = intermediates.flatMap((pem) => parseCertificates(pem, 'intermediate'));
    const path = verifyChain({ leaf: certs[0]!, intermediates: certs.slice(1), roots: this.#roots, nowMs, leafIsCa: true });
    if (this.#verified.size >= MAX_TAILS) this.#verified.clear();
    this.#verified.set(key, Math.min(...path.map((c) => c.notAfter.getTime())));
  }
}
