/**
 * The independent check of "does this bundle verify this chain" that rotation tests assert after
 * every step: node:crypto's own X509Certificate (issuer names and signatures, link by link), not
 * pki's chain code, so a bug there cannot hide itself.
 */
import { X509Certificate } from 'node:crypto';

/** True when the DER chain (leaf first, intermediates, no roots) chains by signature to one of `rootsDer`. */
export function chainVerifies(chainDer: readonly Buffer[], rootsDer: readonly Buffer[]): boolean {
  if (chainDer.length === 0) return false;
  const chain = chainDer.map((d) => new X509Certificate(d));
  let current = chain[0]!;
  for (const next of chain.slice(1)) {
    if (!current.checkIssued(next) || !current.verify(next.publicKey)) return false;
    current = next;
  }
  return rootsDer.map((r) => new X509Certificate(r)).some((a) => current.checkIssued(a) && current.verify(a.publicKey));
}
