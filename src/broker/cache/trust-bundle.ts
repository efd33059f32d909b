/**
 * The trust bundle the broker hands out: the DER roots of its trust domain. Starts from the
 * configured mesh roots and follows the roots the CA sends with each certificate (`follow`, on
 * the certificate managers' `subscribeAll` event), so a root rotation at the CA reaches every
 * consumer. Listeners are called guarded: one that throws is logged and the others still hear
 * of the change.
 */
import { X509Certificate } from 'node:crypto';
import { describeError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/log.js';
import { certificateToPem, parsePem } from '../../pki/pem.js';
import type { AllCertsListener } from './cert-events.js';
import { Listeners } from './listeners.js';

export type BundleListener = (rootsDer: readonly Buffer[]) => void;

/** Where new certificates come from: a certificate manager. */
export interface CertificateSource {
  subscribeAll(listener: AllCertsListener): () => void;
}

export interface TrustBundleOptions {
  /** Where a throwing listener is reported. Default: silent. */
  readonly logger?: Logger;
}

export class TrustBundle {
  readonly trustDomain: string;
  #roots: readonly Buffer[];
  #version = 0;
  readonly #listeners = new Listeners<readonly Buffer[]>();
  readonly #logger: Logger;

  constructor(trustDomain: string, initialRootsDer: readonly Buffer[], options: TrustBundleOptions = {}) {
    this.trustDomain = trustDomain;
    this.#roots = dedupe(initialRootsDer);
    this.#logger = options.logger ?? silentLogger;
  }

  static fromPem(trustDomain: string, pem: string, options: TrustBundleOptions = {}): TrustBundle {
    const roots = parsePem(pem)
      .filter((b) => b.type === 'CERTIFICATE')
      .map((b) => Buffer.from(b.der));
    if (roots.length === 0) throw new Error('trust bundle PEM holds no CERTIFICATE');
    for (const r of roots) new X509Certificate(r); // fails loudly on garbage
    return new TrustBundle(trustDomain, roots, options);
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
    this.#listeners.emit(next, (err) => this.#logger.error('trust bundle listener threw; ignored', { err: describeError(err) }));
    return true;
  }

  onChange(listener: BundleListener): () => void {
    return this.#listeners.add(listener);
  }

  /**
   * Takes the roots of every new certificate `certs` obtains (the CA sends its roots with each
   * chain). The manager tells these listeners before the certificate's own consumers, so a
   * consumer handed a new certificate finds the bundle already current. Returns the unsubscription.
   */
  follow(certs: CertificateSource): () => void {
    return certs.subscribeAll((_identity, event) => {
      if (event.type === 'updated') this.update(event.cert.rootsDer);
    });
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
