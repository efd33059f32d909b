/**
 * prom-client's default process metrics (CPU, memory, handles, event-loop lag, GC) for a
 * component's registry, the one way every long-running component collects them.
 *
 * The event-loop lag is sampled every 100 ms instead of prom-client's 10 ms: at 10 ms the sampler
 * alone wakes an idle daemon ~100 times a second (~0.7 % of a core, measured by
 * `npm run bench:install`), on every node; lag spikes worth alerting on last far longer than
 * 100 ms, and the histogram still records each sample's delay at full precision.
 */
import { collectDefaultMetrics, type Registry } from 'prom-client';

export const EVENT_LOOP_SAMPLE_MS = 100;

export function collectProcessMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
}
