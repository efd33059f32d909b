/**
 * The CA's Prometheus metrics, on a registry of its own (served by the ops endpoint).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { InformerMetrics } from '../kube/informer-metrics.js';
import { collectProcessMetrics } from '../ops/process-metrics.js';

/** Why the transport closed a connection on its own: over the cap, no TLS in time, idle. */
export type ConnectionCloseReason = 'limit' | 'tls_handshake_timeout' | 'idle';
/** Why the transport answered a stream without handing it to the handler. */
export type StreamRefusalReason = 'body_timeout' | 'stream_limit';

/** What the transport counts right now (read when /metrics is scraped, not per call). */
export interface TransportStats {
  readonly connections: number;
  readonly streams: number;
}

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
    help: 'TokenReview cache lookups by result: hit (cached), shared (joined a review in flight), miss (review sent), refused (a refusal remembered by token hash, no review sent), refresh (a hit near its end: reviewed again in the background, the cached verdict still served)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  #signer: { readonly ready: boolean; roots?(): readonly string[] } | undefined;
  readonly signerReady = new Gauge({
    name: 'certbroker_ca_signer_ready',
    help: '1 when the signer has usable material',
    registers: [this.registry],
    collect: () => {
      if (this.#signer) this.signerReady.set(this.#signer.ready ? 1 : 0);
    },
  });
  readonly trustedRoots = new Gauge({
    name: 'certbroker_ca_trusted_roots',
    help: "Roots the CA's answers carry as their last element (2 during a root rotation's overlap)",
    registers: [this.registry],
    collect: () => {
      const roots = this.#signer?.roots?.();
      if (roots) this.trustedRoots.set(roots.join('').match(/-----BEGIN CERTIFICATE-----/g)?.length ?? 0);
    },
  });

  /** Pod informer health, one per cluster (`certbroker_informer_*`). */
  readonly informers = new InformerMetrics(this.registry);
  readonly connectionsClosed = new Counter({
    name: 'certbroker_ca_connections_closed_total',
    help: 'Connections the CA closed on its own, by reason: limit (CA_MAX_CONNECTIONS reached, closed at once), tls_handshake_timeout, idle (no open stream for CA_IDLE_SESSION_TIMEOUT_SECONDS). http2 transport only',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly streamsRefused = new Counter({
    name: 'certbroker_ca_streams_refused_total',
    help: 'Calls answered before reaching the handler, by reason: body_timeout (request message not complete within CA_REQUEST_BODY_TIMEOUT_SECONDS: DEADLINE_EXCEEDED), stream_limit (CA_MAX_STREAMS open: RESOURCE_EXHAUSTED)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  #transport: (() => TransportStats) | undefined;
  readonly openConnections = new Gauge({
    name: 'certbroker_ca_open_connections',
    help: 'TCP connections open on the gRPC port (TLS handshakes in progress included). http2 transport only',
    registers: [this.registry],
    collect: () => {
      const stats = this.#transport?.();
      if (stats) this.openConnections.set(stats.connections);
    },
  });
  readonly openStreams = new Gauge({
    name: 'certbroker_ca_open_streams',
    help: 'HTTP/2 streams (calls) open on the gRPC port. http2 transport only',
    registers: [this.registry],
    collect: () => {
      const stats = this.#transport?.();
      if (stats) this.openStreams.set(stats.streams);
    },
  });

  /** Pre-bound children for the per-request hot path (no label hashing per call). */
  readonly issuedOk = this.requests.labels('issued', 'ok');
  readonly cacheHit = this.tokenReviewCache.labels('hit');

  constructor(options: { readonly defaultMetrics?: boolean } = {}) {
    this.cacheHit.inc(0);
    if (options.defaultMetrics) collectProcessMetrics(this.registry);
    // Make the cache counters visible at 0 before the first request.
    this.tokenReviewCache.inc({ result: 'shared' }, 0);
    this.tokenReviewCache.inc({ result: 'miss' }, 0);
    this.tokenReviewCache.inc({ result: 'refused' }, 0);
    this.tokenReviewCache.inc({ result: 'refresh' }, 0);
    for (const reason of ['limit', 'tls_handshake_timeout', 'idle'] satisfies ConnectionCloseReason[]) this.connectionsClosed.inc({ reason }, 0);
    for (const reason of ['body_timeout', 'stream_limit'] satisfies StreamRefusalReason[]) this.streamsRefused.inc({ reason }, 0);
  }

  /** The signer whose readiness `certbroker_ca_signer_ready` and roots `certbroker_ca_trusted_roots` report (read at each scrape). */
  observeSigner(signer: { readonly ready: boolean; roots?(): readonly string[] }): void {
    this.#signer = signer;
  }

  /** The transport whose counts the open-connection and open-stream gauges report. */
  observeTransport(stats: () => TransportStats): void {
    this.#transport = stats;
  }
}
