/**
 * Informer health as Prometheus metrics on a component's registry:
 * `certbroker_informer_last_event_age_seconds{resource,cluster}` (seconds since the informer
 * last heard from the API server: a complete list, a watch event or a bookmark) and
 * `certbroker_informer_restarts_total{resource,cluster,reason}` (watch re-opened because of the
 * idle watchdog, a 410, an error, a 429, or the server's timeout) and
 * `certbroker_informer_ready{resource,cluster}` (1 while the cache can be trusted, 0 while it is
 * not listed yet or its watch is stale: the informer's `problem()`, which the CA's and the
 * broker's /readyz also report; install-cni's repair controller has only this gauge, as its
 * readiness is about the plugin). `cluster` is empty except on the CA, which follows one informer
 * per cluster.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import { RESTART_REASONS, type RestartReason } from './informer-stats.js';

/** What the metrics read from an informer. */
export interface ObservedInformer {
  readonly resource: string;
  lastEventAgeMs(): number;
  /** Undefined while the cache can be trusted; otherwise why not (not listed yet, stale watch). */
  problem(): string | undefined;
  onRestart(listener: (reason: RestartReason) => void): () => void;
}

interface Tracked {
  readonly informer: ObservedInformer;
  readonly labels: { readonly resource: string; readonly cluster: string };
}

export class InformerMetrics {
  readonly #tracked: Tracked[] = [];
  readonly #restarts: Counter<'resource' | 'cluster' | 'reason'>;

  constructor(registry: Registry) {
    const tracked = this.#tracked;
    new Gauge({
      name: 'certbroker_informer_last_event_age_seconds',
      help: 'Seconds since the informer last heard from the API server (a complete list, a watch event or a bookmark).',
      labelNames: ['resource', 'cluster'] as const,
      registers: [registry],
      collect() {
        for (const t of tracked) this.set(t.labels, t.informer.lastEventAgeMs() / 1000);
      },
    });
    new Gauge({
      name: 'certbroker_informer_ready',
      help: '1 while the informer can be trusted (its first list is in and it heard from the API server within two watchdog windows); 0 otherwise (not listed yet, or a stale watch).',
      labelNames: ['resource', 'cluster'] as const,
      registers: [registry],
      collect() {
        for (const t of tracked) this.set(t.labels, t.informer.problem() === undefined ? 1 : 0);
      },
    });
    this.#restarts = new Counter({
      name: 'certbroker_informer_restarts_total',
      help: 'Watches re-opened, by reason: watchdog (silent watch), 410 (history expired: re-list), error, throttled (429), timeout (server ended the watch).',
      labelNames: ['resource', 'cluster', 'reason'] as const,
      registers: [registry],
    });
  }

  /** Reports `informer` under `resource` (default its own name) and `cluster` (default ''). */
  track(informer: ObservedInformer, labels: { readonly resource?: string; readonly cluster?: string } = {}): void {
    const l = { resource: labels.resource ?? informer.resource, cluster: labels.cluster ?? '' };
    this.#tracked.push({ informer, labels: l });
    for (const reason of RESTART_REASONS) this.#restarts.inc({ ...l, reason }, 0);
    informer.onRestart((reason) => this.#restarts.inc({ ...l, reason }));
  }
}
