/**
 * The real PodIndex: a Kubernetes list+watch of all pods (@kubernetes/client-node ListWatch),
 * reduced to the few fields the node authorizer reads and indexed by name and by
 * (namespace, serviceAccountName, nodeName). Reconnects with capped backoff after a watch
 * error; `synced` turns true after the first complete list and stays true across reconnects
 * (the relist replaces the content).
 */
import { CoreV1Api, makeInformer, type Informer, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import { InMemoryPodIndex, type PodIndex, type PodInfo } from './pod-index.js';

export interface PodInformerOptions {
  readonly kubeConfig: KubeConfig;
  readonly clock: Clock;
  readonly logger: Logger;
}

function toPodInfo(p: V1Pod): PodInfo | undefined {
  const m = p.metadata;
  if (!m?.name || !m.namespace) return undefined;
  return {
    namespace: m.namespace,
    name: m.name,
    uid: m.uid ?? '',
    serviceAccountName: p.spec?.serviceAccountName ?? 'default',
    nodeName: p.spec?.nodeName ?? '',
    phase: p.status?.phase ?? 'Pending',
  };
}

export class PodInformer implements PodIndex {
  readonly #index = new InMemoryPodIndex({ synced: false });
  readonly #o: PodInformerOptions;
  readonly #informer: Informer<V1Pod>;
  readonly #stop = new AbortController();
  #restarting = false;

  constructor(options: PodInformerOptions) {
    this.#o = options;
    const api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#informer = makeInformer<V1Pod>(options.kubeConfig, '/api/v1/pods', () => api.listPodForAllNamespaces());
    const upsert = (p: V1Pod) => {
      const info = toPodInfo(p);
      if (info) this.#index.upsert(info);
    };
    this.#informer.on('add', upsert);
    this.#informer.on('update', upsert);
    this.#informer.on('delete', (p: V1Pod) => {
      if (p.metadata?.name && p.metadata.namespace) this.#index.remove(p.metadata.namespace, p.metadata.name);
    });
    this.#informer.on('error', (err: unknown) => this.#restart(err));
  }

  get synced(): boolean {
    return this.#index.synced;
  }

  get size(): number {
    return this.#index.size;
  }

  getPod(namespace: string, name: string): PodInfo | undefined {
    return this.#index.getPod(namespace, name);
  }

  podsOnNode(key: { readonly namespace: string; readonly serviceAccountName: string; readonly nodeName: string }): readonly PodInfo[] {
    return this.#index.podsOnNode(key);
  }

  /** Starts the list+watch; resolves after the first list (or rejects if it fails). */
  async start(): Promise<void> {
    await this.#informer.start();
    this.#index.markSynced(true);
    this.#o.logger.info('pod informer synced', { pods: this.#index.size });
  }

  /** Starts in the background, retrying the first list until it works or `stop()`. */
  startInBackground(): void {
    this.start().catch((err: unknown) => this.#restart(err));
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#informer.stop();
  }

  #restart(err: unknown): void {
    if (this.#restarting || this.#stop.signal.aborted) return;
    this.#restarting = true;
    this.#o.logger.warn('pod watch failed, restarting', { err });
    void (async () => {
      let delayMs = 500;
      while (!this.#stop.signal.aborted) {
        try {
          await this.#o.clock.sleep(delayMs, this.#stop.signal);
          await this.#informer.start();
          this.#index.markSynced(true);
          break;
        } catch (e) {
          if (this.#stop.signal.aborted) break;
          this.#o.logger.warn('pod list failed, retrying', { err: e, delayMs });
          delayMs = Math.min(delayMs * 2, 30_000);
        }
      }
      this.#restarting = false;
    })().catch(() => undefined);
  }
}
