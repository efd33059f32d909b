/**
 * The CA's Prometheus metrics, on a registry of its own (served by the ops endpoint). The three
 * updates every issued certificate makes (its `issued`/`ok` count, its token-cache `hit`, its
 * signing time) are tallied as plain numbers and handed to prom-client when the metric is read
 * (a scrape, `get()`), not per call: prom-client hashes and validates the label set on every
 * `inc` even through a `labels()` child, and that was a few per cent of the main thread per call.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { InformerMetrics } from '../kube/informer-metrics.js';
import { collectProcessMetrics } from '../ops/process-metrics.js';

/** Why the transport closed a connection on its own: over the cap, no TLS in time, idle. */
export type ConnectionCloseReason = 'limit' | 'tls_handshake_timeout' | 'idle';
/**
 * Why a call was answered before its handler: the request body timeout, CA_MAX_STREAMS, the
 * stream closed (reset, connection gone) before its request message was complete, or a request
 * body that is not one well-formed gRPC message within the bounds (truncated, several, too
 * large, a compression it cannot read). All four on the TLS transports; grpc-js counts
 * `body_timeout` and `cancelled` (what it refuses itself never reaches the CA's code).
 */
export type StreamRefusalReason = 'body_timeout' | 'stream_limit' | 'cancelled' | 'unreadable';

/** What the transport counts right now (read when /metrics is scraped, not per call). */
export interface TransportStats {
  readonly connections: number;
  readonly streams: number;
}

/** One label set of a counter, counted as a plain number and added to the counter when it is read. */
class TalliedChild {
  #n = 0;
  readonly #labels: Readonly<Record<string, string>>;

  constructor(labels: Readonly<Record<string, string>>) {
    this.#labels = labels;
  }

  inc(): void {
    this.#n++;
  }

  /** Adds what was counted since the last flush to `counter` (its `collect`, before it is read). */
  flushInto(counter: Counter): void {
    if (this.#n === 0) return;
    counter.inc(this.#labels, this.#n);
    this.#n = 0;
  }
}

/** Observations held back from a histogram until it is read, or until the buffer is full. */
class BufferedObservations {
  readonly #values = new Float64Array(1024);
  #count = 0;
  readonly #histogram: () => Histogram;

  constructor(histogram: () => Histogram) {
    this.#histogram = histogram;
  }

  observe(value: number): void {
    this.#values[this.#count++] = value;
    if (this.#count === this.#values.length) this.flush();
  }

  flush(): void {
    const h = this.#histogram();
    for (let i = 0; i < this.#count; i++) h.observe(this.#values[i]!);
    this.#count = 0;
  }
}

export class CaMetrics {
  readonly registry = new Registry();
  readonly requests: Counter<'outcome' | 'reason'> = new Counter({
    name: 'certbroker_ca_requests_total',
    help: 'CreateCertificate requests by outcome and reason (an ERR_* code, or "ok")',
    labelNames: ['outcome', 'reason'] as const,
    registers: [this.registry],
    collect: () => this.issuedOk.flushInto(this.requests),
  });
  readonly #signingHistogram: Histogram = new Histogram({
    name: 'certbroker_ca_signing_duration_seconds',
    help: 'Time to sign a certificate (CSR parse and verify, leaf build, sign, PEM)',
    buckets: [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
    collect: () => this.signingSeconds.flush(),
  });
  /** Signing time per certificate (seconds), handed to the histogram when it is read. */
  readonly signingSeconds = new BufferedObservations(() => this.#signingHistogram);
  readonly tokenReviewCache: Counter<'result'> = new Counter({
    name: 'certbroker_ca_token_review_cache_total',
    help: 'TokenReview cache lookups by result: hit (cached), shared (joined a review in flight), miss (review sent), refused (a refusal remembered by token hash, no review sent), refresh (a hit near its end: reviewed again in the background, the cached verdict still served)',
    labelNames: ['result'] as const,
    registers: [this.registry],
    collect: () => this.cacheHit.flushInto(this.tokenReviewCache),
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
    help: 'Calls answered before reaching the handler, by reason: body_timeout (request message not complete within CA_REQUEST_BODY_TIMEOUT_SECONDS: DEADLINE_EXCEEDED), stream_limit (CA_MAX_STREAMS open: RESOURCE_EXHAUSTED), cancelled (the stream closed before the request message was complete), unreadable (not one well-formed gRPC message within the bounds: its gRPC status)',
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

  /** The per-request hot path's label sets, tallied (no label hashing per call). */
  readonly issuedOk = new TalliedChild({ outcome: 'issued', reason: 'ok' });
  readonly cacheHit = new TalliedChild({ result: 'hit' });

  constructor(options: { readonly defaultMetrics?: boolean } = {}) {
    this.tokenReviewCache.inc({ result: 'hit' }, 0);
    if (options.defaultMetrics) collectProcessMetrics(this.registry);
    // Make the cache counters visible at 0 before the first request.
    this.tokenReviewCache.inc({ result: 'shared' }, 0);
    this.tokenReviewCache.inc({ result: 'miss' }, 0);
    this.tokenReviewCache.inc({ result: 'refused' }, 0);
    this.tokenReviewCache.inc({ result: 'refresh' }, 0);
    for (const reason of ['limit', 'tls_handshake_timeout', 'idle'] satisfies ConnectionCloseReason[]) this.connectionsClosed.inc({ reason }, 0);
    for (const reason of ['body_timeout', 'stream_limit', 'cancelled', 'unreadable'] satisfies StreamRefusalReason[]) this.streamsRefused.inc({ reason }, 0);
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
