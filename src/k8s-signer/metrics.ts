/**
 * The k8s-signer's metrics, on the process registry the ops endpoint serves: requests handled
 * per controller and outcome, and signing latency (from noticing an approved request to the
 * status write).
 */
import { Counter, Histogram, type Registry } from 'prom-client';

/** What became of one request a controller handled. */
export type SignerOutcome = 'issued' | 'refused' | 'retried';

export class SignerMetrics {
  readonly #requests: Counter<'controller' | 'outcome' | 'reason'>;
  readonly #latency: Histogram<'controller'>;

  constructor(registry: Registry) {
    this.#requests = new Counter({
      name: 'certbroker_k8s_signer_requests_total',
      help: 'Requests a signing controller handled, by outcome (issued, refused with a Failed/Denied condition, retried after a transient error) and reason',
      labelNames: ['controller', 'outcome', 'reason'],
      registers: [registry],
    });
    this.#latency = new Histogram({
      name: 'certbroker_k8s_signer_issue_seconds',
      help: 'Time from picking up an approved request to its status write',
      labelNames: ['controller'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    });
  }

  count(controller: string, outcome: SignerOutcome, reason = ''): void {
    this.#requests.inc({ controller, outcome, reason });
  }

  observeIssue(controller: string, seconds: number): void {
    this.#latency.observe({ controller }, seconds);
  }
}
