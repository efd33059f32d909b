/**
 * A streaming front's metrics (the Broker API's, the Workload API's): open streams and
 * first-message latency per RPC, refusals by RPC and code, named `<prefix>_streams_open`,
 * `<prefix>_first_message_seconds` and `<prefix>_rejections_total`; `observer()` feeds them.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { BrokerApiObserver, WorkloadApiObserver } from './fronts/index.js';

export interface SvidStreamMetricsOptions {
  /** Metric name prefix, e.g. `certbroker_broker_api`. */
  readonly prefix: string;
  /** The front's name in help texts, e.g. `Broker API`. */
  readonly api: string;
  /** What starts a stream, in the first-message help text (`subscription`, `request`). */
  readonly opener: string;
  readonly firstMessageBuckets: readonly number[];
}

export class SvidStreamMetrics {
  readonly streamsOpen: Gauge<'rpc'>;
  readonly firstMessageSeconds: Histogram<'rpc'>;
  readonly rejections: Counter<'rpc' | 'code'>;

  constructor(registry: Registry, o: SvidStreamMetricsOptions) {
    const registers = [registry];
    this.streamsOpen = new Gauge({ name: `${o.prefix}_streams_open`, help: `Open ${o.api} streams.`, labelNames: ['rpc'], registers });
    this.firstMessageSeconds = new Histogram({
      name: `${o.prefix}_first_message_seconds`,
      help: `Time from a ${o.api} ${o.opener} to its first message.`,
      labelNames: ['rpc'],
      buckets: [...o.firstMessageBuckets],
      registers,
    });
    this.rejections = new Counter({
      name: `${o.prefix}_rejections_total`,
      help: `${o.api} calls refused, by RPC and error code.`,
      labelNames: ['rpc', 'code'],
      registers,
    });
  }

  /** Both fronts report the same events. */
  observer(): BrokerApiObserver & WorkloadApiObserver {
    return {
      streamOpened: (rpc) => this.streamsOpen.inc({ rpc }),
      streamClosed: (rpc) => this.streamsOpen.dec({ rpc }),
      firstMessage: (rpc, ms) => this.firstMessageSeconds.observe({ rpc }, ms / 1000),
      rejected: (rpc, code) => this.rejections.inc({ rpc, code }),
    };
  }
}
