/**
 * The trust bundle the broker hands out: the DER roots of its trust domain. Starts from the
 * configured mesh roots and follows the roots the CA sends with each certificate (`follow`, on
 * the certificate managers' `subscribeAll` event; `update` for any other source of the CA's
 * roots), so a root rotation at the CA reaches every consumer. The roots the CA sends last are
 * the *target*; the bundle served moves towards it by two rules that keep every leaf the node
 * hands out verifiable by every consumer of the node:
 *
 * - a root the CA adds is served at once (trusting one more root never breaks a verification);
 * - a root the CA drops is kept while any certificate held (every identity of every manager
 *   followed) still chains only to it: those are re-issued first (`refreshNow` on their
 *   manager), and the root goes only once none is left and `settleMs` (the streams' update
 *   pacing window) has passed since the last of them was replaced, so every open stream has been
 *   sent its re-issued leaf before any consumer is sent a bundle without the old root.
 *
 * `servable(cert)` is the last check before a front sends a leaf with this bundle: false when the
 * leaf's chain does not verify against the roots served now (it is then withheld). `holdUntil(cert)`
 * is the other side of the first rule: a leaf that chains to a root added less than `settleMs` ago
 * waits until then, so the node's other streams have been sent that root before any consumer
 * presents a leaf under it (a CA that adds a root and signs under it at once). Listeners are
 * called guarded: one that throws is logged and the others still hear of the change.
 */
import { X509Certificate } from 'node:crypto';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import { silentLogger, type Logger } from '../../core/log.js';
import { certificateToPem, parsePem } from '../../pki/pem.js';
import { chainAnchor } from '../../pki/chain.js';
import type { AllCertsListener } from './cert-events.js';
import { ClockTimer } from './clock-timer.js';
import { Listeners } from '../../core/listeners.js';
import type { WorkloadCert } from './workload-cert.js';

export type BundleListener = (rootsDer: readonly Buffer[]) => void;

/** Where new certificates come from: a certificate manager. */
export interface CertificateSource {
  subscribeAll(listener: AllCertsListener): () => void;
  /** Re-issues `identity`'s certificate soon (a rotation needs a leaf under another root). */
  refreshNow?(identity: string): void;
}

/** What the bundle tells metrics and logs. */
export interface TrustBundleObserver {
  /** The roots served changed (`version` is the new version). */
  changed?(version: number, roots: number): void;
  /** A held certificate chains only to a root the CA dropped: re-issue asked. */
  reissueRequested?(identity: string): void;
  /** Roots the CA dropped that are still served for certificates not yet re-issued. */
  retained?(roots: number): void;
  /** A front was about to send a leaf that does not verify against the bundle: withheld. */
  withheld?(identity: string): void;
}

export interface TrustBundleOptions {
  /** Where a throwing listener is reported. Default: silent. */
  readonly logger?: Logger;
  /** For the settle delay of a root removal. Needed when `settleMs` > 0. */
  readonly clock?: Clock;
  /** How long a certificate update takes to reach every open stream (the update pacing window). Default 0. */
  readonly settleMs?: number;
  readonly observer?: TrustBundleObserver;
}

interface Held {
  readonly identity: string;
  readonly source: CertificateSource;
  /** Key of the served root the certificate chains to ('' for none). */
  readonly anchor: string;
  /** Re-issue already asked for this certificate. */
  asked: boolean;
}

const keyOf = (der: Buffer): string => der.toString('base64');

export class TrustBundle {
  readonly trustDomain: string;
  #roots: readonly Buffer[];
  #target: readonly Buffer[] | undefined;
  #version = 0;
  readonly #listeners = new Listeners<readonly Buffer[]>();
  readonly #logger: Logger;
  readonly #o: TrustBundleOptions;
  readonly #held = new Map<string, Held>();
  #sources = 0;
  #lastMoveAt = Number.NEGATIVE_INFINITY;
  readonly #settle: ClockTimer | undefined;
  #retained = 0;
  /** When each root served was added (absent: served from the start). */
  readonly #addedAt = new Map<string, number>();
  /** Verdicts of `servable`, per certificate, for the version they were made at: the root it chains to ('' for none). */
  readonly #verdicts = new WeakMap<WorkloadCert, { readonly version: number; readonly anchor: string }>();

  constructor(trustDomain: string, initialRootsDer: readonly Buffer[], options: TrustBundleOptions = {}) {
    this.trustDomain = trustDomain;
    this.#roots = dedupe(initialRootsDer);
    this.#logger = options.logger ?? silentLogger;
    this.#o = options;
    if ((options.settleMs ?? 0) > 0 && !options.clock) throw new Error('TrustBundle: settleMs needs a clock');
    this.#settle = options.clock ? new ClockTimer(options.clock) : undefined;
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

  /** Roots the CA no longer sends that are still served until the certificates under them are re-issued. */
  get retainedRoots(): number {
    return this.#retained;
  }

  /**
   * The CA trusts `rootsDer` now (the last element of its answers): adds the new ones at once,
   * drops the others once nothing held needs them (see the file header). Returns true and
   * notifies listeners when the roots served changed. An empty list changes nothing.
   */
  update(rootsDer: readonly Buffer[]): boolean {
    const next = dedupe(rootsDer);
    if (next.length === 0) return false;
    this.#target = next;
    return this.#reconcile();
  }

  onChange(listener: BundleListener): () => void {
    return this.#listeners.add(listener);
  }

  /**
   * True when `cert`'s chain verifies against the roots served now: a front sends a leaf with
   * this bundle only then (otherwise it is withheld, counted, and the consumer keeps the leaf it
   * has, which the bundle still verifies, until the next change).
   */
  servable(cert: WorkloadCert): boolean {
    return this.#anchorOf(cert) !== '';
  }

  /**
   * The instant (ms, the clock's) before which `cert` is not to be sent: the moment the root it
   * chains to was added plus `settleMs`, or -Infinity when that root was served from the start
   * (or long enough ago) or the leaf is not servable at all (`servable` says so).
   */
  holdUntil(cert: WorkloadCert): number {
    const added = this.#addedAt.get(this.#anchorOf(cert));
    return added === undefined ? Number.NEGATIVE_INFINITY : added + (this.#o.settleMs ?? 0);
  }

  #anchorOf(cert: WorkloadCert): string {
    const known = this.#verdicts.get(cert);
    if (known?.version === this.#version) return known.anchor;
    const at = chainAnchor(cert.chainDer, this.#roots);
    const anchor = at >= 0 ? keyOf(this.#roots[at]!) : '';
    this.#verdicts.set(cert, { version: this.#version, anchor });
    if (anchor === '') {
      this.#logger.warn('leaf does not verify against the trust bundle; withheld', { identity: cert.identity, serial: cert.serial, bundleVersion: this.#version });
      this.#o.observer?.withheld?.(cert.identity);
    }
    return anchor;
  }

  /**
   * Takes the roots of every new certificate `certs` obtains (the CA sends its roots with each
   * chain) and remembers which root each held certificate chains to. The manager tells these
   * listeners before the certificate's own consumers, so a consumer handed a new certificate
   * finds the bundle already current. Returns the unsubscription.
   */
  follow(certs: CertificateSource): () => void {
    const source = ++this.#sources;
    return certs.subscribeAll((identity, event) => {
      const key = `${source}\0${identity}`;
      if (event.type === 'forgotten') {
        this.#held.delete(key);
        this.#reconcile();
        return;
      }
      const target = dedupe(event.cert.rootsDer);
      if (target.length > 0) this.#target = target;
      const candidates = [...this.#roots, ...target];
      const at = chainAnchor(event.cert.chainDer, candidates);
      const anchor = at >= 0 ? keyOf(candidates[at]!) : '';
      const before = this.#held.get(key);
      if (before !== undefined && before.anchor !== anchor) this.#lastMoveAt = this.#now();
      this.#held.set(key, { identity, source: certs, anchor, asked: false });
      this.#reconcile();
    });
  }

  #now(): number {
    return this.#o.clock?.now() ?? 0;
  }

  /** Moves the roots served towards the target by the two rules; true when they changed. */
  #reconcile(): boolean {
    const target = this.#target;
    if (target === undefined) return false;
    const wanted = new Set(target.map(keyOf));
    const served = new Set(this.#roots.map(keyOf));
    const added = target.filter((r) => !served.has(keyOf(r)));
    for (const r of added) this.#addedAt.set(keyOf(r), this.#now());
    let next = [...this.#roots, ...added];
    const dropped = new Set(next.map(keyOf).filter((k) => !wanted.has(k)));
    if (dropped.size > 0 && this.#mayDrop(dropped)) {
      next = next.filter((r) => wanted.has(keyOf(r)));
      dropped.clear();
    }
    if (dropped.size !== this.#retained) {
      this.#retained = dropped.size;
      this.#o.observer?.retained?.(dropped.size);
    }
    if (sameSet(next, this.#roots)) return false;
    this.#roots = next;
    for (const k of [...this.#addedAt.keys()]) if (!next.some((r) => keyOf(r) === k)) this.#addedAt.delete(k);
    this.#version++;
    this.#o.observer?.changed?.(this.#version, next.length);
    this.#listeners.emit(next, (err) => this.#logger.error('trust bundle listener threw; ignored', { err: describeError(err) }));
    return true;
  }

  /**
   * Whether the roots in `dropped` may go now: no held certificate chains to one of them (those
   * that do are asked to re-issue, once each), and the last re-anchored one has had `settleMs`
   * to reach its streams (else a timer re-checks then).
   */
  #mayDrop(dropped: ReadonlySet<string>): boolean {
    let blocked = false;
    for (const held of this.#held.values()) {
      if (!dropped.has(held.anchor)) continue;
      blocked = true;
      if (held.asked) continue;
      held.asked = true;
      this.#logger.info('certificate chains to a root the CA dropped; re-issuing it', { identity: held.identity });
      this.#o.observer?.reissueRequested?.(held.identity);
      held.source.refreshNow?.(held.identity);
    }
    if (blocked) return false;
    const due = this.#lastMoveAt + (this.#o.settleMs ?? 0);
    const now = this.#now();
    if (now >= due) return true;
    if (this.#settle && this.#settle.due !== due) this.#settle.arm(due - now, () => void this.#reconcile());
    return false;
  }
}

function dedupe(roots: readonly Buffer[]): Buffer[] {
  const seen = new Set<string>();
  const out: Buffer[] = [];
  for (const r of roots) {
    const k = keyOf(r);
    if (seen.has(k)) continue;
    seen.add(k);
    out.push(Buffer.from(r));
  }
  return out;
}

function sameSet(a: readonly Buffer[], b: readonly Buffer[]): boolean {
  if (a.length !== b.length) return false;
  const keys = new Set(a.map(keyOf));
  return b.every((x) => keys.has(keyOf(x)));
}
