/**
 * The namespaces' labels, for the one-round-trip ambient ADD (registration-server.ts): the shared
 * informer of src/kube over `/api/v1/namespaces`, kept as name -> labels only.
 */
import type { V1Namespace } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/log.js';
import type { Rng } from '../../core/rng.js';
import type { InformerMetrics } from '../../kube/informer-metrics.js';
import type { InformerSettings } from '../../kube/informer-settings.js';
import { Informer } from '../../kube/informer.js';
import type { AmbientLookup } from './registration-server.js';
import type { NodePodWatch } from './node-pod-watch.js';
import { podFacts } from './pod-lookup.js';

export interface NamespaceWatchOptions {
  readonly kubeConfig: KubeConfig;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  readonly settings?: InformerSettings;
  readonly metrics?: InformerMetrics;
}

export class NamespaceWatch {
  readonly #informer: Informer<V1Namespace>;

  constructor(options: NamespaceWatchOptions) {
    this.#informer = new Informer<V1Namespace>({
      ...options.settings,
      resource: 'namespaces',
      path: '/api/v1/namespaces',
      kubeConfig: options.kubeConfig,
      clock: options.clock,
      rng: options.rng,
      logger: options.logger,
      // Only the labels are read: the cache keeps nothing else of each namespace.
      transform: (ns) => ({ metadata: { name: ns.metadata?.name, labels: ns.metadata?.labels, resourceVersion: ns.metadata?.resourceVersion, uid: ns.metadata?.uid } }),
    });
    options.metrics?.track(this.#informer);
  }

  /** The namespace's labels (undefined: not seen, or the first list is not in yet). */
  labels(name: string): Readonly<Record<string, string>> | undefined {
    const ns = this.#informer.get(undefined, name);
    return ns ? (ns.metadata?.labels ?? {}) : undefined;
  }

  /** Starts in the background (the ambient ADD answers "unknown" until the first list is in). */
  start(): void {
    void this.#informer.start();
  }

  async stop(deadlineMs?: number): Promise<void> {
    await this.#informer.stop(deadlineMs);
  }
}

/** The registration server's view: the pod from the node pod watch, its namespace's labels from here. */
export function watchedAmbientLookup(pods: NodePodWatch, namespaces: NamespaceWatch): AmbientLookup {
  return (namespace, name) => {
    const pod = pods.pod(namespace, name);
    const facts = pod && podFacts(pod);
    const namespaceLabels = namespaces.labels(namespace);
    if (!pod || !facts || !namespaceLabels) return undefined;
    return { facts, labels: pod.metadata?.labels ?? {}, annotations: pod.metadata?.annotations ?? {}, namespaceLabels };
  };
}
