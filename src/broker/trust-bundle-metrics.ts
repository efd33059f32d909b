/**
 * The trust bundle's metrics (`certbroker_broker_trust_bundle_*`): what a root rotation is
 * watched by — the bundle's version and root count, the roots the CA dropped that are still
 * served while certificates under them are re-issued, the re-issues a rotation asked for, and
 * leaves withheld because they did not verify against the bundle (never expected: a non-zero
 * rate is a CA answering with a chain its own roots do not verify).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { TrustBundle, TrustBundleObserver } from './cache/trust-bundle.js';

export class TrustBundleMetrics {
  readonly reissues: Counter;
  readonly withheld: Counter;

  /** `bundle` is read at scrape time. */
  constructor(registry: Registry, bundle: () => TrustBundle | undefined) {
    const registers = [registry];
    new Gauge({
      name: 'certbroker_broker_trust_bundle_version',
      help: 'Changes of the trust bundle served to consumers since the broker started (0: the configured roots).',
      registers,
      collect() {
        this.set(bundle()?.version ?? 0);
      },
    });
    new Gauge({
      name: 'certbroker_broker_trust_bundle_roots',
      help: 'Roots in the trust bundle served to consumers (2 during a root rotation overlap).',
      registers,
      collect() {
        this.set(bundle()?.rootsDer.length ?? 0);
      },
    });
    new Gauge({
      name: 'certbroker_broker_trust_bundle_retained_roots',
      help: 'Roots the CA no longer sends that are still served until the certificates chaining to them are re-issued.',
      registers,
      collect() {
        this.set(bundle()?.retainedRoots ?? 0);
      },
    });
    this.reissues = new Counter({
      name: 'certbroker_broker_rotation_reissues_total',
      help: 'Certificates re-issued ahead of their refresh because they chained to a root the CA dropped.',
      registers,
    });
    this.withheld = new Counter({
      name: 'certbroker_broker_svid_withheld_total',
      help: 'SVID messages not sent because the leaf did not verify against the trust bundle sent with it.',
      registers,
    });
  }

  observer(): TrustBundleObserver {
    return { reissueRequested: () => this.reissues.inc(), withheld: () => this.withheld.inc() };
  }
}
