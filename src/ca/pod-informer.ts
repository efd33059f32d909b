/**
 * The real PodIndex: a Kubernetes list+watch of all pods (@kubernetes/client-node ListWatch),
 * reduced to the few fields the node authorizer reads and indexed by name and by
 * (namespace, serviceAccountName, nodeName).
 *
 * Recovery: the client's ListWatch re-lists by itself after a clean watch end or 410 Gone; on
 * any other error (apiserver 5xx, connection reset) it stops. Then this class builds a fresh
 * ListWatch after a capped backoff, lists again, and reconciles the index with the new list
 * (pods deleted during the outage are dropped). `synced` turns true after the first complete
 * list and stays true across reconnects: a slightly stale index beats refusing every request.
 */
import { CoreV1Api, makeInformer, type Informer, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import { InMemoryPodIndex, type PodIndex, type PodInfo, type PodRef } from './pod-index.js';

export interface PodInformerOptions {
  readonly kubeConfig: KubeConfig;
  readonly clock: Clock;
  readonly logger: Logger;
}

type ListingInformer = Informer<V1Pod> & { list(namespace?: string): readonly V1Pod[] };

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

export class PodInformer implements PodIndex {
  readonly #index = new InMemoryPodIndex({ synced: false });
  readonly #o: PodInformerOptions;
  readonly #api: CoreV1Api;
  readonly #stop = new AbortController();
  #informer: ListingInformer;
  #generation = 0;
  #restarting = false;
  #failed = false;
  /** The ListWatch start (list, then watch) most recently begun; stop() waits for it. */
  #starting: Promise<void> | undefined;

  constructor(options: PodInformerOptions) {
    this.#o = options;
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#informer = this.#create();
  }

  get synced(): boolean {
    return this.#index.synced;
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

  /** Starts the list+watch; resolves after the first list (or rejects if it fails). */
  async start(): Promise<void> {
    const starting = this.#informer.start();
    this.#starting = starting;
    await starting;
    // stop() during the list: ListWatch goes on to open its watch once the list is in, so stop
    // it again now, or that watch would hold the process open after shutdown.
    if (this.#stop.signal.aborted) {
      await this.#informer.stop().catch(() => undefined);
      return;
    }
    // ListWatch reports a failed list through its error callback and still resolves start();
    // the callback has then re-armed the restart loop, and the index is not synced.
    if (this.#failed) return;
    this.#index.markSynced(true);
    this.#o.logger.info('pod informer synced', { pods: this.#index.size });
  }

  /** Starts in the background, retrying until it works or `stop()`. */
  startInBackground(): void {
    this.start().catch((err: unknown) => this.#restart(err));
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    this.#generation++;
    await this.#informer.stop();
    // A list still in flight opens its watch when it completes: wait for it and stop that too.
    if (this.#starting) {
      await this.#starting.catch(() => undefined);
      await this.#informer.stop().catch(() => undefined);
    }
  }

  /** A ListWatch whose events only count while it is the current one. */
  #create(): ListingInformer {
    const generation = ++this.#generation;
    const informer = makeInformer<V1Pod>(this.#o.kubeConfig, '/api/v1/pods', () => this.#api.listPodForAllNamespaces()) as ListingInformer;
    const current = () => generation === this.#generation;
    const upsert = (p: V1Pod) => {
      if (!current()) return;
      const info = toPodInfo(p);
      if (info) this.#index.upsert(info);
    };
    informer.on('add', upsert);
    informer.on('update', upsert);
    informer.on('delete', (p: V1Pod) => {
      if (current() && p.metadata?.name && p.metadata.namespace) this.#index.remove({ namespace: p.metadata.namespace, name: p.metadata.name });
    });
    informer.on('error', (err: unknown) => {
      if (current()) this.#restart(err);
    });
    return informer;
  }

  #restart(err: unknown): void {
    if (this.#stop.signal.aborted) return;
    // An error while a restart is in progress (the new watch failing at once) re-arms the loop.
    this.#failed = true;
    if (this.#restarting) return;
    this.#restarting = true;
    this.#o.logger.warn('pod watch failed, restarting', { err });
    void (async () => {
      let delayMs = 500;
      while (this.#failed && !this.#stop.signal.aborted) {
        this.#failed = false;
        try {
          await this.#o.clock.sleep(delayMs, this.#stop.signal);
          delayMs = Math.min(delayMs * 2, 30_000);
          await this.#informer.stop().catch(() => undefined);
          const next = this.#create();
          this.#informer = next;
          const starting = next.start();
          this.#starting = starting;
          await starting;
          if (this.#stop.signal.aborted) {
            await next.stop().catch(() => undefined);
            break;
          }
          if (this.#failed) continue; // the list or the new watch failed (see start())
          this.#reconcile(next.list());
          this.#index.markSynced(true);
          this.#o.logger.info('pod watch restarted', { pods: this.#index.size });
        } catch (e) {
          if (this.#stop.signal.aborted) break;
          this.#failed = true;
          this.#o.logger.warn('pod list failed, retrying', { err: e, delayMs });
        }
      }
      this.#restarting = false;
    })().catch(() => undefined);
  }

  /** Drops index entries that the fresh list no longer has (deleted during the outage). */
  #reconcile(listed: readonly V1Pod[]): void {
    const keep = new Set(listed.map((p) => `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`));
    for (const pod of this.#index.all()) {
      if (!keep.has(`${pod.namespace}/${pod.name}`)) this.#index.remove(pod);
    }
  }
}
