/**
 * The Workload API's metrics, on the broker's registry: caller attestations by outcome and their
 * latency (SO_PEERCRED + /proc, per connection), open streams and first-message latency per RPC,
 * refusals by RPC and code.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ConnectionAttestorObserver } from './attestation/index.js';
import type { WorkloadApiObserver } from './fronts/index.js';

/** Attestation takes milliseconds (a process start): finer buckets than the CA's. */
const ATTESTATION_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5];
const FIRST_MESSAGE_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class WorkloadApiMetrics {
  readonly attestations: Counter<'outcome'>;
  readonly attestationSeconds: Histogram;
  readonly streamsOpen: Gauge<'rpc'>;
  readonly firstMessageSeconds: Histogram<'rpc'>;
  readonly rejections: Counter<'rpc' | 'code'>;

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
    this.streamsOpen = new Gauge({ name: 'certbroker_broker_workload_api_streams_open', help: 'Open Workload API streams.', labelNames: ['rpc'], registers });
    this.firstMessageSeconds = new Histogram({
      name: 'certbroker_broker_workload_api_first_message_seconds',
      help: 'Time from a Workload API request to its first message.',
      labelNames: ['rpc'],
      buckets: FIRST_MESSAGE_BUCKETS,
      registers,
    });
    this.rejections = new Counter({
      name: 'certbroker_broker_workload_api_rejections_total',
      help: 'Workload API calls refused, by RPC and error code.',
      labelNames: ['rpc', 'code'],
      registers,
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

  apiObserver(): WorkloadApiObserver {
    return {
      streamOpened: (rpc) => this.streamsOpen.inc({ rpc }),
      streamClosed: (rpc) => this.streamsOpen.dec({ rpc }),
      firstMessage: (rpc, ms) => this.firstMessageSeconds.observe({ rpc }, ms / 1000),
      rejected: (rpc, code) => this.rejections.inc({ rpc, code }),
    };
  }
}
