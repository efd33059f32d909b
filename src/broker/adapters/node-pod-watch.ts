/**
 * The node pod watch: the pods of this node (the shared informer of src/kube with
 * `fieldSelector=spec.nodeName=<node>`) fed into the cache room's `NodePods`.
 */
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Rng } from '../../core/rng.js';
import type { InformerMetrics } from '../../kube/informer-metrics.js';
import type { InformerSettings } from '../../kube/informer-settings.js';
import { createPodInformer, type PodInformer } from '../../kube/pod-informer.js';
import type { NodePods } from '../cache/node-pods.js';
import { sidecarPodFields } from '../../protocol/cni-sidecar-pod.js';
import { podFacts } from './pod-lookup.js';
import type { SidecarPodLookup } from './registration-server.js';

export interface NodePodWatchOptions {
  readonly kubeConfig: KubeConfig;
  readonly nodeName: string;
  readonly pods: NodePods;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** How long `start()` waits for the first list before going on in the background. Default 10 000. */
  readonly syncTimeoutMs?: number;
  /** Watchdog, page size, backoff (src/kube defaults when absent). */
  readonly settings?: InformerSettings;
  /** Where the informer reports its health (`certbroker_informer_*`). */
  readonly metrics?: InformerMetrics;
}

/**
 * Watches the pods of one node into `NodePods`, through the shared informer of src/kube
 * (`fieldSelector=spec.nodeName=<node>`; paginated lists, re-list on 410 with a diff, backoff
 * with Retry-After on errors, an idle watchdog that re-opens a silent watch).
 */
export class NodePodWatch {
  readonly #o: NodePodWatchOptions;
  readonly #informer: PodInformer;
  #errors = 0;

  constructor(options: NodePodWatchOptions) {
    this.#o = options;
    // A pod the broker cannot make sense of is logged and skipped; it never stops the watch.
    const guarded = (what: string, fn: (p: V1Pod) => void) => (p: V1Pod) => {
      try {
        fn(p);
      } catch (err) {
        options.logger.warn(`pod ${what} skipped`, { pod: `${p.metadata?.namespace}/${p.metadata?.name}`, err: describeError(err) });
      }
    };
    const upsert = guarded('update', (p) => {
      const facts = podFacts(p);
      if (facts) options.pods.upsert(facts);
    });
    this.#informer = createPodInformer({
      ...options.settings,
      kubeConfig: options.kubeConfig,
      fieldSelector: `spec.nodeName=${options.nodeName}`,
      clock: options.clock,
      rng: options.rng,
      logger: options.logger,
      onAdd: upsert,
      onUpdate: (p) => upsert(p),
      onDelete: guarded('delete', (p) => {
        if (p.metadata?.uid) options.pods.remove(p.metadata.uid);
      }),
      // The informer logs each failure with its retry delay.
      onError: () => this.#errors++,
    });
    options.metrics?.track(this.#informer);
  }

  /** The watched pod namespace/name as last seen (undefined: not on this node, or not seen yet). */
  pod(namespace: string, name: string): V1Pod | undefined {
    return this.#informer.get(namespace, name);
  }

  /** The first full list has been applied. */
  get synced(): boolean {
    return this.#informer.synced;
  }

  /** Undefined while the pod list can be trusted; otherwise why not (not listed yet, stale watch). */
  problem(): string | undefined {
    return this.#informer.problem();
  }

  /** Watch/list failures so far. */
  get errors(): number {
    return this.#errors;
  }

  /**
   * Starts; resolves after the first list, or after `syncTimeoutMs` with the informer retrying in
   * the background, or at once when `signal` aborts (a stop during the start).
   */
  async start(signal?: AbortSignal): Promise<void> {
    this.#informer.start();
    const timeout = new AbortController();
    signal?.addEventListener('abort', () => timeout.abort(), { once: true });
    const timer = this.#o.clock.sleep(this.#o.syncTimeoutMs ?? 10_000, timeout.signal).then(
      () => 'timeout' as const,
      () => 'cancelled' as const,
    );
    const synced = this.#informer.waitForSync().then(
      () => 'synced' as const,
      () => 'cancelled' as const, // stopped before the first list: never an unhandled rejection
    );
    const outcome = await Promise.race([synced, timer]);
    timeout.abort();
    if (outcome === 'synced') this.#o.logger.info('node pod watch synced', { node: this.#o.nodeName, pods: this.#o.pods.size });
    else if (!signal?.aborted) this.#o.logger.warn('node pod watch not synced yet; continuing in the background', { node: this.#o.nodeName });
  }

  async stop(deadlineMs?: number): Promise<void> {
    await this.#informer.stop(deadlineMs);
  }
}

/**
 * `POST /v1/sidecar-pod`'s view: the watched pod cut to the sidecar rules' fields when asked (the
 * watch already keeps the whole pod, so this keeps nothing more per pod).
 */
export function watchedSidecarPodLookup(pods: NodePodWatch): SidecarPodLookup {
  return (namespace, name) => {
    const pod = pods.pod(namespace, name);
    const uid = pod?.metadata?.uid;
    return pod && uid ? { uid, fields: sidecarPodFields(pod) } : undefined;
  };
}
