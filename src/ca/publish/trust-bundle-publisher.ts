/**
 * The CA's trust-bundle publisher: every replica stands in the Lease election
 * (`src/kube` LeaderElector, the Lease in the CA's namespace); only the leader publishes, one
 * `RootPublication` per leadership term (informers and writes end with the term, before the
 * lease is released). The bundle is the signer's current roots (every root during a rotation),
 * re-published whenever the signer reports a change. Metrics on the CA's registry:
 * `certbroker_leader{lease}` and its companions (LeaderMetrics), and
 * `certbroker_ca_trust_bundle_writes_total{object,action,result}`.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { Counter, type Registry } from 'prom-client';
import { systemClock, type Clock } from '../../core/clock.js';
import { settleWithin, type LongLived } from '../../core/long-lived.js';
import { silentLogger, type Logger } from '../../core/log.js';
import { systemRng, type Rng } from '../../core/rng.js';
import { LeaderElector, ELECTOR_STOP_DEADLINE_MS } from '../../kube/leader-elector.js';
import { LeaderMetrics } from '../../kube/leader-metrics.js';
import { kubeLeaseClient } from '../../kube/lease-client.js';
import type { InformerSettings } from '../../kube/informer-settings.js';
import type { Signer } from '../signer.js';
import type { TrustBundlePublishConfig } from './publish-config.js';
import { RootPublication } from './root-publication.js';
import { trustBundleInstallation } from './trust-bundle.js';
import { kubeTrustBundleWriter, type TrustBundleWriter } from './trust-bundle-writer.js';

export interface TrustBundlePublisherOptions {
  readonly config: TrustBundlePublishConfig;
  readonly kubeConfig: KubeConfig;
  /** The roots to publish (the signer's, read at each write). */
  readonly roots: () => readonly string[];
  /** Subscribes to root changes (the signer's onChange); returns the unsubscribe. */
  readonly onRootsChange: (listener: () => void) => () => void;
  readonly registry?: Registry;
  readonly informer?: InformerSettings;
  readonly writer?: TrustBundleWriter;
  readonly clock?: Clock;
  readonly rng?: Rng;
  readonly logger?: Logger;
}

export class TrustBundlePublisher implements LongLived {
  readonly #o: TrustBundlePublisherOptions;
  readonly #elector: LeaderElector;
  readonly #logger: Logger;
  readonly #writes: Counter<'object' | 'action' | 'result'> | undefined;
  #term: { publication: RootPublication; done: Promise<void> } | undefined;

  constructor(options: TrustBundlePublisherOptions) {
    this.#o = options;
    const { config } = options;
    this.#logger = (options.logger ?? silentLogger).child({ part: 'trust-bundle-publisher' });
    this.#elector = new LeaderElector({
      lease: kubeLeaseClient({ kubeConfig: options.kubeConfig, namespace: config.leaseNamespace, name: config.leaseName }),
      identity: config.identity,
      ...config.election,
      clock: options.clock ?? systemClock,
      rng: options.rng ?? systemRng,
      logger: this.#logger,
      onStartedLeading: (signal) => this.#lead(signal),
    });
    if (options.registry) {
      new LeaderMetrics(options.registry).track(this.#elector);
      this.#writes = new Counter({
        name: 'certbroker_ca_trust_bundle_writes_total',
        help: 'Writes of the published trust bundle (istio-ca-root-cert ConfigMaps, the ClusterTrustBundle) by this replica, by object, action and result.',
        labelNames: ['object', 'action', 'result'] as const,
        registers: [options.registry],
      });
    }
  }

  get elector(): LeaderElector {
    return this.#elector;
  }

  /** True while this replica holds the Lease and publishes. */
  get isLeader(): boolean {
    return this.#elector.isLeader;
  }

  /** Resolves once the current term has nothing queued or being written (tests). */
  async idle(): Promise<void> {
    await this.#term?.publication.idle();
  }

  #lead(signal: AbortSignal): void {
    const o = this.#o;
    const publication = new RootPublication(
      {
        kubeConfig: o.kubeConfig,
        writer: o.writer ?? kubeTrustBundleWriter(o.kubeConfig),
        roots: o.roots,
        onRootsChange: o.onRootsChange,
        skipNamespaces: o.config.skipNamespaces,
        installation: trustBundleInstallation(o.config.leaseNamespace, o.config.leaseName),
        ...(o.config.clusterTrustBundleSignerName ? { clusterTrustBundleSignerName: o.config.clusterTrustBundleSignerName } : {}),
        ...(o.informer ? { informer: o.informer } : {}),
        clock: o.clock ?? systemClock,
        rng: o.rng ?? systemRng,
        logger: this.#logger,
        onWrite: (w) => this.#writes?.inc(w),
      },
      signal,
    );
    const term = { publication, done: publication.run() };
    this.#term = term;
    void term.done.finally(() => {
      if (this.#term === term) this.#term = undefined;
    });
  }

  start(signal?: AbortSignal): Promise<void> {
    return this.#elector.start(signal);
  }

  /** Ends the term (informers, queue) and releases the Lease; never rejects. */
  async stop(deadlineMs = ELECTOR_STOP_DEADLINE_MS): Promise<void> {
    const term = this.#term;
    await this.#elector.stop(deadlineMs);
    if (term) await settleWithin(term.done, deadlineMs);
  }
}

/**
 * The CA's publisher for `config.publish` over the default cluster, publishing `signer`'s roots
 * (none while it is not ready) and following its changes; undefined when publication is off.
 */
export function publisherFor(
  config: { readonly publish?: TrustBundlePublishConfig; readonly informer?: InformerSettings },
  parts: { readonly signer: Signer; readonly cluster: { readonly kubeConfig: KubeConfig } | undefined; readonly registry: Registry; readonly clock: Clock; readonly logger: Logger },
): TrustBundlePublisher | undefined {
  const { signer, cluster, logger } = parts;
  if (config.publish === undefined) return undefined;
  if (cluster === undefined) {
    logger.warn('trust-bundle publication needs the default cluster; not publishing');
    return undefined;
  }
  return new TrustBundlePublisher({
    config: config.publish,
    kubeConfig: cluster.kubeConfig,
    roots: () => (signer.ready ? signer.roots() : []),
    onRootsChange: (listener) => signer.onChange(listener),
    registry: parts.registry,
    ...(config.informer ? { informer: config.informer } : {}),
    clock: parts.clock,
    logger,
  });
}
