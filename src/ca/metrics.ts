/**
 * The CA's Prometheus metrics, on a registry of its own (served by the ops endpoint).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { InformerMetrics } from '../kube/informer-metrics.js';
import { collectProcessMetrics } from '../ops/process-metrics.js';

export type RequestOutcome = 'issued' | 'denied' | 'invalid' | 'unavailable' | 'error';

export class CaMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'certbroker_ca_requests_total',
    help: 'CreateCertificate requests by outcome and reason (an ERR_* code, or "ok")',
    labelNames: ['outcome', 'reason'] as const,
    registers: [this.registry],
  });
  readonly signingSeconds = new Histogram({
    name: 'certbroker_ca_signing_duration_seconds',
    help: 'Time to sign a certificate (CSR parse and verify, leaf build, sign, PEM)',
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly tokenReviewCache = new Counter({
    name: 'certbroker_ca_token_review_cache_total',
    help: 'TokenReview cache lookups by result: hit (cached), shared (joined a review in flight), miss (review sent)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly signerReady = new Gauge({
    name: 'certbroker_ca_signer_ready',
    help: '1 when the signer has usable material',
    registers: [this.registry],
  });

  /** Pod informer health, one per cluster (`certbroker_informer_*`). */
  readonly informers = new InformerMetrics(this.registry);

  /** Pre-bound children for the per-request hot path (no label hashing per call). */
  readonly issuedOk = this.requests.labels('issued', 'ok');
  readonly cacheHit = this.tokenReviewCache.labels('hit');

  constructor(options: { readonly defaultMetrics?: boolean } = {}) {
    this.cacheHit.inc(0);
    if (options.defaultMetrics) collectProcessMetrics(this.registry);
    // Make the cache counters visible at 0 before the first request.
    this.tokenReviewCache.inc({ result: 'shared' }, 0);
    this.tokenReviewCache.inc({ result: 'miss' }, 0);
  }
}
