/**
 * The trust bundle the broker hands out: the DER roots of its trust domain. Starts from the
 * configured mesh roots and follows the roots the CA sends with each certificate, so a root
 * rotation at the CA reaches every consumer.
 */
import { X509Certificate } from 'node:crypto';
import { parsePem } from '../pki/pem.js';
import { certificateToPem } from '../pki/pem.js';

export type BundleListener = (rootsDer: readonly Buffer[]) => void;

export class TrustBundle {
  readonly trustDomain: string;
  #roots: readonly Buffer[];
  #version = 0;
  readonly #listeners = new Set<BundleListener>();

  constructor(trustDomain: string, initialRootsDer: readonly Buffer[]) {
    this.trustDomain = trustDomain;
    this.#roots = dedupe(initialRootsDer);
  }

  static fromPem(trustDomain: string, pem: string): TrustBundle {
    const roots = parsePem(pem)
      .filter((b) => b.type === 'CERTIFICATE')
      .map((b) => Buffer.from(b.der));
    if (roots.length === 0) throw new Error('trust bundle PEM holds no CERTIFICATE');
    for (const r of roots) new X509Certificate(r); // fails loudly on garbage
    return new TrustBundle(trustDomain, roots);
  }

  get rootsDer(): readonly Buffer[] {
    return this.#roots;
  }

  /** Roots concatenated, as the Broker API `bundle` field carries them. */
  get concatenatedDer(): Buffer {
    return Buffer.concat(this.#roots as Buffer[]);
  }

  get pem(): string {
    return this.#roots.map((r) => certificateToPem(r)).join('');
  }

  /** Increases on every change. */
  get version(): number {
    return this.#version;
  }

  /** Replaces the roots when they differ (as a set); returns true and notifies listeners on change. */
  update(rootsDer: readonly Buffer[]): boolean {
    const next = dedupe(rootsDer);
    if (next.length === 0 || sameSet(next, this.#roots)) return false;
    this.#roots = next;
    this.#version++;
    for (const l of [...this.#listeners]) l(next);
    return true;
  }

  onChange(listener: BundleListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
}

function dedupe(roots: readonly Buffer[]): Buffer[] {
  const seen = new Set<string>();
  const out: Buffer[] = [];
  for (const r of roots) {
    const k = r.toString('base64');
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(Buffer.from(r));
  }
  return out;
}

function sameSet(a: readonly Buffer[], b: readonly Buffer[]): boolean {
  if (a.length !== b.length) return false;
  const keys = new Set(a.map((x) => x.toString('base64')));
  return b.every((x) => keys.has(x.toString('base64')));
}
