/**
 * Leader election as Prometheus metrics on a component's registry:
 * `certbroker_leader{lease}` (1 while this process holds the lease, 0 otherwise; read at scrape),
 * `certbroker_leader_changes_total{lease,change=gained|lost}` and
 * `certbroker_leader_lease_failures_total{lease}` (lease reads and writes that failed or
 * conflicted; a lease held by someone else is not a failure).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LeadershipChange } from './leader-elector.js';

/** What the metrics read from an elector. */
export interface ObservedElector {
  readonly lease: string;
  readonly isLeader: boolean;
  onChange(listener: (change: LeadershipChange) => void): () => void;
}

export class LeaderMetrics {
  readonly #tracked: ObservedElector[] = [];
  readonly #changes: Counter<'lease' | 'change'>;
  readonly #failures: Counter<'lease'>;

  constructor(registry: Registry) {
    const tracked = this.#tracked;
    new Gauge({
      name: 'certbroker_leader',
      help: '1 while this process holds the leader-election lease, 0 otherwise.',
      labelNames: ['lease'] as const,
      registers: [registry],
      collect() {
        for (const e of tracked) this.set({ lease: e.lease }, e.isLeader ? 1 : 0);
      },
    });
    this.#changes = new Counter({
      name: 'certbroker_leader_changes_total',
      help: 'Times this process gained or lost the leader-election lease.',
      labelNames: ['lease', 'change'] as const,
      registers: [registry],
    });
    this.#failures = new Counter({
      name: 'certbroker_leader_lease_failures_total',
      help: 'Lease reads and writes that failed or conflicted (a lease held by another holder is not counted).',
      labelNames: ['lease'] as const,
      registers: [registry],
    });
  }

  track(elector: ObservedElector): void {
    const lease = elector.lease;
    this.#tracked.push(elector);
    for (const change of ['gained', 'lost'] as const) this.#changes.inc({ lease, change }, 0);
    this.#failures.inc({ lease }, 0);
    elector.onChange((c) => {
      if (c.type === 'gained' || c.type === 'lost') this.#changes.inc({ lease, change: c.type });
      else if (c.type === 'failure') this.#failures.inc({ lease });
    });
  }
}
