/**
 * The broker's Prometheus metrics, on its own registry: identities by state (like kubelet's
 * pod certificate states), each identity's certificate expiry, the own SVID's state and expiry,
 * CA fetch latency and errors by code, queue depth and CA calls in flight, time from pod
 * registration to certificate ready, Broker API streams and first-message latency, CNI
 * registrations, token refreshes, the trust bundle (trust-bundle-metrics.ts).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { CertManager, CertManagerObserver } from './cache/cert-manager.js';
import { OWN_SVID_STATES, type OwnSvid } from './own-svid.js';
import { CaCallError } from './adapters/ca-client.js';
import { BrokerError } from './errors.js';
import type { BrokerApiObserver } from './fronts/broker-api/broker-api.js';
import type { RegistrationObserver } from './adapters/registration-server.js';
import { InformerMetrics } from '../kube/informer-metrics.js';
import { collectProcessMetrics } from '../ops/process-metrics.js';
import { WorkloadApiMetrics } from './workload-api-metrics.js';
import { SvidStreamMetrics } from './svid-stream-metrics.js';
import { TrustBundleMetrics } from './trust-bundle-metrics.js';
import type { TrustBundle } from './cache/trust-bundle.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class BrokerMetrics {
  readonly registry = new Registry();
  readonly fetchSeconds: Histogram<'outcome'>;
  readonly caErrors: Counter<'code'>;
  readonly registrationToReadySeconds: Histogram;
  /** Broker API streams and refusals (`certbroker_broker_api_*`). */
  readonly brokerApi: SvidStreamMetrics;
  readonly registrations: Counter<'outcome'>;
  readonly tokenRefreshes: Counter<'outcome'>;
  /** The node pod watch's health (`certbroker_informer_*`). */
  readonly informers: InformerMetrics;
  /** The Workload API front (`certbroker_broker_workload_api_*`). */
  readonly workloadApi: WorkloadApiMetrics;
  /** The trust bundle and root rotations (`certbroker_broker_trust_bundle_*`, `certbroker_broker_rotation_*`). */
  readonly trustBundle: TrustBundleMetrics;

  /**
   * `certs` and `ownSvid` are read at scrape time (the parts may not exist yet). With
   * `processMetrics`, the registry also carries the process metrics every long-running component
   * has (src/ops/process-metrics.ts: CPU, memory, handles, event-loop lag, GC).
   */
  constructor(
    certs: () => CertManager | undefined,
    ownSvid: () => OwnSvid = () => ({ state: 'missing', notAfter: undefined }),
    options: { readonly processMetrics?: boolean; readonly bundle?: () => TrustBundle | undefined } = {},
  ) {
    const registers = [this.registry];
    this.trustBundle = new TrustBundleMetrics(this.registry, options.bundle ?? (() => undefined));
    this.informers = new InformerMetrics(this.registry);
    this.workloadApi = new WorkloadApiMetrics(this.registry);
    if (options.processMetrics) collectProcessMetrics(this.registry);
    stateGauges(registers, certs, ownSvid);
    this.fetchSeconds = new Histogram({
      name: 'certbroker_broker_ca_fetch_duration_seconds',
      help: 'CA certificate fetch latency (key generation, CSR, call, checks).',
      labelNames: ['outcome'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.caErrors = new Counter({
      name: 'certbroker_broker_ca_errors_total',
      help: 'Failed CA fetches by gRPC status name or broker error code.',
      labelNames: ['code'],
      registers,
    });
    this.registrationToReadySeconds = new Histogram({
      name: 'certbroker_broker_registration_to_ready_seconds',
      help: 'Time from the first pod needing an identity (registration or watch) to its first certificate.',
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.brokerApi = new SvidStreamMetrics(this.registry, {
      prefix: 'certbroker_broker_api',
      api: 'Broker API',
      opener: 'subscription',
      firstMessageBuckets: LATENCY_BUCKETS,
    });
    this.registrations = new Counter({
      name: 'certbroker_broker_cni_registrations_total',
      help: 'CNI pod registrations by outcome.',
      labelNames: ['outcome'],
      registers,
    });
    this.tokenRefreshes = new Counter({
      name: 'certbroker_broker_token_refreshes_total',
      help: 'Broker token fetches by outcome.',
      labelNames: ['outcome'],
      registers,
    });
  }

  /** The certificate manager's metrics: fetch latency by outcome, CA errors by code, registration -> ready. */
  certObserver(): CertManagerObserver {
    return {
      fetchSucceeded: (_identity, _cert, ms) => this.fetchSeconds.observe({ outcome: 'success' }, ms / 1000),
      fetchFailed: (_identity, err, ms) => {
        this.fetchSeconds.observe({ outcome: 'failure' }, ms / 1000);
        const code = err instanceof CaCallError ? err.grpcCode : err instanceof BrokerError ? err.code : 'UNKNOWN';
        this.caErrors.inc({ code });
      },
      firstReady: (_identity, ms) => this.registrationToReadySeconds.observe(ms / 1000),
    };
  }

  apiObserver(): BrokerApiObserver {
    return this.brokerApi.observer();
  }

  registrationObserver(): RegistrationObserver {
    return { registered: (outcome) => this.registrations.inc({ outcome }) };
  }
}

/** Gauges read from the certificate managers at scrape time: identities by state, expiries, the own SVID, the queue. */
function stateGauges(registers: Registry[], certs: () => CertManager | undefined, ownSvid: () => OwnSvid): void {
    new Gauge({
      name: 'certbroker_broker_pod_certificate_states',
      help: 'Workload identities held by the broker, by state (pending, ready, failed, expired).',
      labelNames: ['state'],
      registers,
      collect() {
        const counts = certs()?.countByState() ?? { pending: 0, ready: 0, failed: 0, expired: 0 };
        for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
      },
    });
    new Gauge({
      name: 'certbroker_broker_certificate_expiry_timestamp_seconds',
      help: 'notAfter (Unix seconds) of the certificate held per workload identity; for an expired identity, of the one that expired.',
      labelNames: ['identity'],
      registers,
      collect() {
        this.reset();
        for (const s of certs()?.statuses() ?? []) {
          const notAfter = s.notAfter ?? s.expiredAt;
          if (notAfter !== undefined) this.set({ identity: s.identity }, notAfter / 1000);
        }
      },
    });
    new Gauge({
      name: 'certbroker_broker_own_svid_state',
      help: "The broker's own SVID (its Broker API serving certificate): 1 for the current state (ready, expired, missing), 0 for the others.",
      labelNames: ['state'],
      registers,
      collect() {
        const { state } = ownSvid();
        for (const s of OWN_SVID_STATES) this.set({ state: s }, s === state ? 1 : 0);
      },
    });
    new Gauge({
      name: 'certbroker_broker_own_svid_expiry_timestamp_seconds',
      help: "notAfter (Unix seconds) of the broker's own SVID (of the expired one while expired); 0 while none was obtained.",
      registers,
      collect() {
        const { notAfter } = ownSvid();
        this.set(notAfter === undefined ? 0 : notAfter / 1000);
      },
    });
    new Gauge({
      name: 'certbroker_broker_fetch_queue_depth',
      help: 'Identities waiting for a CA slot.',
      registers,
      collect() {
        this.set(certs()?.queued ?? 0);
      },
    });
    new Gauge({
      name: 'certbroker_broker_ca_calls_in_flight',
      help: 'CA calls currently running.',
      registers,
      collect() {
        this.set(certs()?.inFlight ?? 0);
      },
    });
}
