/**
 * The real PodIndex: the shared informer of src/kube over all pods, reduced to the few fields
 * the node authorizer reads and indexed by name and by (namespace, serviceAccountName, nodeName).
 *
 * Recovery is the informer's: paginated lists, re-list on 410 with a diff (pods deleted during
 * an outage are dropped), backoff with Retry-After on errors, and the idle watchdog that
 * re-opens a watch that went silent. `synced` turns true after the first complete list and
 * stays true across reconnects: a slightly stale index beats refusing every request; `problem()`
 * tells readiness when the index is not listed yet or has gone stale.
 */
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import type { InformerSettings } from '../kube/informer-settings.js';
import { createPodInformer, type PodInformer as KubePodInformer } from '../kube/pod-informer.js';
import { InMemoryPodIndex, type PodIndex, type PodInfo, type PodRef } from './pod-index.js';

export interface PodInformerOptions {
  readonly kubeConfig: KubeConfig;
  readonly clock: Clock;
  readonly rng?: Rng;
  readonly logger: Logger;
  readonly settings?: InformerSettings;
}

/**
 * A pod as the authorizer sees it. `spec.serviceAccountName` is taken as it is, never defaulted:
 * the apiserver sets it on every ordinary pod, and it is empty only on mirror pods of static
 * pods, which whoever can write a node's manifest directory (node root) can create in any
 * namespace. Such a pod is indexed under no service account (`''`, which no SPIFFE ID names),
 * so it never authorizes impersonation of `<ns>/default` or anything else.
 */
export function toPodInfo(p: V1Pod): PodInfo | undefined {
  const m = p.metadata;
  if (!m?.name || !m.namespace) return undefined;
  return {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid ?? '',
    serviceAccountName: p.spec?.serviceAccountName ?? '',
    nodeName: p.spec?.nodeName ?? '',
    phase: p.status?.phase ?? 'Pending',
  };
}

/** What the informer keeps of a pod (all pods of the cluster are cached: keep it small). */
function slimPod(p: V1Pod): V1Pod {
  const m = p.metadata;
  return {
    metadata: { name: m?.name, namespace: m?.namespace, uid: m?.uid, resourceVersion: m?.resourceVersion },
    spec: { containers: [], serviceAccountName: p.spec?.serviceAccountName, nodeName: p.spec?.nodeName },
    status: { phase: p.status?.phase },
  } as V1Pod;
}

export class PodInformer implements PodIndex {
  readonly #index = new InMemoryPodIndex({ synced: true });
  readonly #informer: KubePodInformer;

  constructor(options: PodInformerOptions) {
    const upsert = (p: V1Pod) => {
      const info = toPodInfo(p);
      if (info) this.#index.upsert(info);
    };
    this.#informer = createPodInformer({
      ...options.settings,
      kubeConfig: options.kubeConfig,
      clock: options.clock,
      ...(options.rng ? { rng: options.rng } : {}),
      logger: options.logger,
      transform: slimPod,
      onAdd: upsert,
      onUpdate: (p) => upsert(p),
      onDelete: (p) => {
        if (p.metadata?.name && p.metadata.namespace) this.#index.remove({ namespace: p.metadata.namespace, name: p.metadata.name });
      },
    });
  }

  /** The first complete list is in. */
  get synced(): boolean {
    return this.#informer.synced;
  }

  /** Undefined while the index can be trusted; otherwise why not (not listed yet, stale watch). */
  problem(): string | undefined {
    return this.#informer.problem();
  }

  /** Calls `listener` when `problem()` turns (listed, gone stale, heard again); returns an unsubscribe. */
  onHealthChange(listener: () => void): () => void {
    return this.#informer.onHealthChange(() => listener());
  }

  /** The informer underneath (metrics). */
  get informer(): KubePodInformer {
    return this.#informer;
  }

  get size(): number {
    return this.#index.size;
  }

  getPod(ref: PodRef): PodInfo | undefined {
    return this.#index.getPod(ref);
  }

  podsOnNode(key: { readonly namespace: string; readonly serviceAccountName: string; readonly nodeName: string }): readonly PodInfo[] {
    // Pods without a service account (see toPodInfo) stand for no identity.
    if (key.serviceAccountName === '') return [];
    return this.#index.podsOnNode(key);
  }

  /** Starts the list+watch in the background (retrying until it works, or `stop()`/`signal`). */
  start(signal?: AbortSignal): void {
    this.#informer.start(signal);
  }

  /** Resolves after the first complete list (rejects with ERR_KUBE_INFORMER_STOPPED when stopped first). */
  waitForSync(): Promise<void> {
    return this.#informer.waitForSync();
  }

  async stop(deadlineMs?: number): Promise<void> {
    await this.#informer.stop(deadlineMs);
  }
}
