/**
 * The Workload API's metrics, on the broker's registry: caller attestations by outcome and their
 * latency (SO_PEERCRED + /proc, per connection), open streams and first-message latency per RPC,
 * refusals by RPC and code.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ConnectionAttestorObserver, PeerCredentialsMode } from './attestation/index.js';
import type { WorkloadApiObserver } from './fronts/index.js';
import { SvidStreamMetrics } from './svid-stream-metrics.js';

/** Attestation takes milliseconds (a process start): finer buckets than the CA's. */
const ATTESTATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];
const FIRST_MESSAGE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class WorkloadApiMetrics {
  readonly attestations: Counter<'outcome'>;
  readonly attestationSeconds: Histogram;
  /** 1 for the way SO_PEERCRED is read (`helper`: one long-lived Perl; `batch`: a Perl start per batch). */
  readonly peerCredentialsMode: Gauge<'mode'>;
  readonly helperExits: Counter;
  readonly fallbackReads: Counter;
  readonly connectionsOpen: Gauge;
  #connectionsHeld: () => number = () => 0;
  /** Connections closed or calls refused at a bound, by bound. */
  readonly limited: Counter<'limit'>;
  /** Open streams, first-message latency, refusals (`certbroker_broker_workload_api_*`). */
  readonly streams: SvidStreamMetrics;

  constructor(registry: Registry) {
    const registers = [registry];
    this.attestations = new Counter({
      name: 'certbroker_broker_workload_api_attestations_total',
      help: 'Workload API connections attested, by outcome (attested, not-in-pod, pid-reused, unavailable, ...).',
      labelNames: ['outcome'],
      registers,
    });
    this.attestationSeconds = new Histogram({
      name: 'certbroker_broker_workload_api_attestation_seconds',
      help: 'Time to attest one Workload API connection (peer credentials, /proc reads).',
      buckets: ATTESTATION_BUCKETS,
      registers,
    });
    this.peerCredentialsMode = new Gauge({
      name: 'certbroker_broker_workload_api_peercred_mode',
      help: 'How the Workload API reads its callers\' SO_PEERCRED: 1 for the mode in use (helper: one long-lived Perl given each descriptor; batch: a Perl start per batch of connections, the fallback).',
      labelNames: ['mode'],
      registers,
    });
    this.helperExits = new Counter({
      name: 'certbroker_broker_workload_api_peercred_helper_exits_total',
      help: 'Times the long-lived SO_PEERCRED helper ended or could not start (it is started again on the next connection).',
      registers,
    });
    this.fallbackReads = new Counter({
      name: 'certbroker_broker_workload_api_peercred_fallback_reads_total',
      help: 'Connections whose SO_PEERCRED the helper failed (exited, timed out, restarting, queue full) and a Perl start per batch read instead.',
      registers,
    });
    const held = () => this.#connectionsHeld();
    this.connectionsOpen = new Gauge({
      name: 'certbroker_broker_workload_api_connections_open',
      help: 'Workload API connections open now (WORKLOAD_API_MAX_CONNECTIONS bounds them).',
      registers,
      collect() {
        this.set(held());
      },
    });
    this.limited = new Counter({
      name: 'certbroker_broker_workload_api_limited_total',
      help: 'Workload API connections closed at accept (limit="connections") or calls answered RESOURCE_EXHAUSTED, by the bound reached (connections, connections-per-caller, streams, streams-per-caller).',
      labelNames: ['limit'],
      registers,
    });
    this.streams = new SvidStreamMetrics(registry, {
      prefix: 'certbroker_broker_workload_api',
      api: 'Workload API',
      opener: 'request',
      firstMessageBuckets: FIRST_MESSAGE_BUCKETS,
    });
  }

  attestationObserver(): ConnectionAttestorObserver {
    return {
      attested: (outcome, ms) => {
        this.attestations.inc({ outcome });
        this.attestationSeconds.observe(ms / 1000);
      },
    };
  }

  /** Where `connections_open` reads its value. */
  countConnections(held: () => number): void {
    this.#connectionsHeld = held;
  }

  peerCredentialsModeIs(mode: PeerCredentialsMode): void {
    for (const m of ['helper', 'batch'] as const) this.peerCredentialsMode.set({ mode: m }, m === mode ? 1 : 0);
  }

  apiObserver(): WorkloadApiObserver {
    return this.streams.observer();
  }
}
