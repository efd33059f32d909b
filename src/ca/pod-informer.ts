/**
 * The real PodIndex: the shared informer of src/kube over all pods, reduced to the few fields
 * the node authorizer reads and kept in the compact index (compact-pod-index.ts, by name and
 * per node). List pages are decoded as they stream in (src/kube/slim-pod-page.ts), so neither a
 * page's body nor its pods are ever held whole.
 *
 * Recovery is the informer's: paginated lists, re-list on 410 with a diff (pods deleted during
 * an outage are dropped), backoff with Retry-After on errors, and the idle watchdog that
 * re-opens a watch that went silent. `synced` turns true after the first complete list and
 * stays true across reconnects: a slightly stale index beats refusing every request; `problem()`
 * tells readiness when the index is not listed yet or has gone stale.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import type { InformerSettings } from '../kube/informer-settings.js';
import { createPodInformer, type PodInformer as KubePodInformer } from '../kube/pod-informer.js';
import { readSlimPodPage } from '../kube/slim-pod-page.js';
import { CompactPodIndex } from './compact-pod-index.js';
import type { NodeAccountKey, PodIndex, PodInfo, PodRef, PodSlots } from './pod-index.js';

export interface PodInformerOptions {
  readonly kubeConfig: KubeConfig;
  readonly clock: Clock;
  readonly rng?: Rng;
  readonly logger: Logger;
  readonly settings?: InformerSettings;
}

export { toPodInfo } from './compact-pod-index.js';

export class PodInformer implements PodIndex {
  #index = new CompactPodIndex();
  readonly #informer: KubePodInformer;

  constructor(options: PodInformerOptions) {
    this.#informer = createPodInformer({
      ...options.settings,
      kubeConfig: options.kubeConfig,
      clock: options.clock,
      ...(options.rng ? { rng: options.rng } : {}),
      logger: options.logger,
      // List pages stream into the compact index; watch events are reduced to the same fields.
      store: (what) => (this.#index = new CompactPodIndex({ what })),
      readPage: readSlimPodPage,
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

  /** The current index's slots (a re-list may swap the index: its `instance` tells). */
  get slots(): PodSlots {
    return this.#index;
  }

  getPod(ref: PodRef): PodInfo | undefined {
    return this.#index.getPod(ref);
  }

  podsOnNode(key: NodeAccountKey): readonly PodInfo[] {
    // Pods without a service account (see toPodInfo) stand for no identity.
    if (key.serviceAccountName === '') return [];
    return this.#index.podsOnNode(key);
  }

  hasActivePodOnNode(key: NodeAccountKey): boolean {
    return key.serviceAccountName !== '' && this.#index.hasActivePodOnNode(key);
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
