/**
 * One leadership term of trust-bundle publication, as istiod's namespace controller does it:
 * informers over namespaces, over the `istio-ca-root-cert` ConfigMaps (field selector on the
 * name, every namespace) and over the CA's ClusterTrustBundle (by name), and one work queue of
 * keys (`ns/<name>`, `ctb`). Once both informers have synced every namespace is queued; after
 * that a namespace added or changed, a ConfigMap edited or deleted, the bundle edited or deleted,
 * and a change of the signer's roots queue what they touch. Reconciling a namespace creates the
 * ConfigMap when missing and rewrites `root-cert.pem` (and istiod's label) when it differs,
 * leaving other keys alone; terminating and skipped namespaces are left alone, and a missing
 * bundle (signer not loaded) writes nothing. Failed writes are retried by the queue with backoff.
 * A third informer lists the ClusterTrustBundles carrying the CA's labels for this installation
 * (`app.kubernetes.io/managed-by=certbroker-ca`, `certbroker.io/ca-installation=<its Lease>`):
 * one of them not named after the current signer (left by this installation under another
 * signer name) is deleted, with its uid and resourceVersion as preconditions, at each leadership
 * gain and whenever the informer sees it again (relist, edits). A bundle without both labels
 * (another installation's, someone else's) is never deleted, whatever its name, and the current
 * one is not rewritten while it carries another installation's label (two installations under one
 * signer name: the first keeps it, the other warns once per term).
 */
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Rng } from '../../core/rng.js';
import { WorkQueue } from '../../core/work-queue.js';
import { KubeApiError } from '../../kube/errors.js';
import { Informer } from '../../kube/informer.js';
import type { InformerSettings } from '../../kube/informer-settings.js';
import {
  configMapUpdate,
  desiredConfigMap,
  desiredTrustBundle,
  ROOT_CONFIGMAP_NAME,
  rootBundlePem,
  TRUST_BUNDLE_INSTALLATION_LABEL,
  trustBundleLabels,
  trustBundleName,
  trustBundleUpdate,
  type StoredConfigMap,
  type StoredTrustBundle,
} from './trust-bundle.js';
import type { TrustBundleWriter } from './trust-bundle-writer.js';

export interface PublicationOptions {
  readonly kubeConfig: KubeConfig;
  readonly writer: TrustBundleWriter;
  readonly roots: () => readonly string[];
  readonly onRootsChange: (listener: () => void) => () => void;
  readonly skipNamespaces: readonly string[];
  readonly clusterTrustBundleSignerName?: string;
  /** This installation's label value (`trustBundleInstallation`): scopes which bundles are its own. */
  readonly installation: string;
  readonly informer?: InformerSettings;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** Counts each write by object kind, action and result. */
  readonly onWrite?: (write: PublishedWrite) => void;
}

export interface PublishedWrite {
  readonly object: 'configmap' | 'clustertrustbundle';
  readonly action: 'create' | 'update' | 'delete';
  readonly result: 'ok' | 'error';
}

type Namespace = KubernetesObject & { status?: { phase?: string } };
type ConfigMap = KubernetesObject & StoredConfigMap;
type TrustBundle = KubernetesObject & StoredTrustBundle;

const CTB_KEY = 'ctb';
const NS_PREFIX = 'ns/';
const STALE_PREFIX = 'stale-ctb/';
const CTB_PATH = '/apis/certificates.k8s.io/v1beta1/clustertrustbundles';

function ownedSelector(installation: string): string {
  return Object.entries(trustBundleLabels(installation)).map(([k, v]) => `${k}=${v}`).join(',');
}

function isOwned(ctb: TrustBundle, installation: string): boolean {
  return Object.entries(trustBundleLabels(installation)).every(([k, v]) => ctb.metadata?.labels?.[k] === v);
}

function httpStatus(err: unknown): number | undefined {
  return err instanceof KubeApiError ? err.httpStatus : undefined;
}

export class RootPublication {
  readonly #o: PublicationOptions;
  readonly #signal: AbortSignal;
  readonly #queue: WorkQueue<string>;
  readonly #namespaces: Informer<Namespace>;
  readonly #configMaps: Informer<ConfigMap>;
  readonly #bundles: Informer<TrustBundle> | undefined;
  readonly #owned: Informer<TrustBundle> | undefined;
  readonly #skip: ReadonlySet<string>;
  #synced = false;
  #warnedOwner: string | undefined;

  /** Runs until `signal` (the leader's) aborts; `done` settles when everything has stopped. */
  constructor(options: PublicationOptions, signal: AbortSignal) {
    this.#o = options;
    this.#signal = signal;
    this.#skip = new Set(options.skipNamespaces);
    const { clock, rng, logger } = options;
    this.#queue = new WorkQueue({ process: (key) => this.#reconcile(key), clock, rng, logger });
    const common = { kubeConfig: options.kubeConfig, clock, rng, logger, ...(options.informer ?? {}) };
    const onNamespace = (ns: Namespace) => this.#queueNamespace(ns.metadata?.name);
    this.#namespaces = new Informer<Namespace>({ ...common, path: '/api/v1/namespaces', onAdd: onNamespace, onUpdate: onNamespace });
    const onConfigMap = (cm: ConfigMap) => this.#queueNamespace(cm.metadata?.namespace);
    this.#configMaps = new Informer<ConfigMap>({
      ...common, path: '/api/v1/configmaps', resource: 'root-configmaps', fieldSelector: `metadata.name=${ROOT_CONFIGMAP_NAME}`,
      onAdd: onConfigMap, onUpdate: onConfigMap, onDelete: onConfigMap,
    });
    const signer = options.clusterTrustBundleSignerName;
    const onBundle = () => this.#queueBundle();
    this.#bundles = signer === undefined ? undefined : new Informer<TrustBundle>({
      ...common, path: CTB_PATH, resource: 'clustertrustbundles', fieldSelector: `metadata.name=${trustBundleName(signer)}`,
      onAdd: onBundle, onUpdate: onBundle, onDelete: onBundle,
    });
    const onOwned = (ctb: TrustBundle) => this.#queueStale(ctb.metadata?.name);
    this.#owned = signer === undefined ? undefined : new Informer<TrustBundle>({
      ...common, path: CTB_PATH, resource: 'owned-clustertrustbundles', labelSelector: ownedSelector(options.installation),
      onAdd: onOwned, onUpdate: onOwned,
    });
  }

  #informers(): Informer<KubernetesObject>[] {
    return [this.#namespaces, this.#configMaps, ...(this.#bundles ? [this.#bundles] : []), ...(this.#owned ? [this.#owned] : [])];
  }

  /** Starts the informers, queues everything once they synced, and stops when the signal aborts. */
  async run(): Promise<void> {
    const unsubscribe = this.#o.onRootsChange(() => this.#queueAll());
    try {
      for (const i of this.#informers()) await i.start(this.#signal);
      await Promise.all(this.#informers().map((i) => i.waitForSync()));
      this.#synced = true;
      this.#o.logger.info('publishing the trust bundle', { namespaces: this.#namespaces.list().length });
      this.#queueAll();
      await new Promise<void>((resolve) => {
        if (this.#signal.aborted) resolve();
        else this.#signal.addEventListener('abort', () => resolve(), { once: true });
      });
    } catch (err) {
      if (!this.#signal.aborted) this.#o.logger.error('trust-bundle publication stopped', { error: describeError(err) });
    } finally {
      unsubscribe();
      await this.#queue.stop();
      await Promise.all(this.#informers().map((i) => i.stop()));
    }
  }

  /** Resolves once nothing is queued or being written (tests). */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  #queueNamespace(name: string | undefined): void {
    if (this.#synced && name !== undefined && !this.#skip.has(name)) this.#queue.add(NS_PREFIX + name);
  }

  #queueBundle(): void {
    if (this.#synced && this.#bundles) this.#queue.add(CTB_KEY);
  }

  /** Queues an owned bundle that is not the current one (the current one is #reconcileBundle's). */
  #queueStale(name: string | undefined): void {
    const signer = this.#o.clusterTrustBundleSignerName;
    if (this.#synced && signer !== undefined && name !== undefined && name !== trustBundleName(signer)) this.#queue.add(STALE_PREFIX + name);
  }

  #queueAll(): void {
    if (!this.#synced) return;
    for (const ns of this.#namespaces.list()) this.#queueNamespace(ns.metadata?.name);
    this.#queueBundle();
    for (const ctb of this.#owned?.list() ?? []) this.#queueStale(ctb.metadata?.name);
  }

  async #reconcile(key: string): Promise<void> {
    if (this.#signal.aborted) return;
    if (key.startsWith(STALE_PREFIX)) return this.#deleteStale(key.slice(STALE_PREFIX.length));
    const bundle = rootBundlePem(this.#o.roots());
    if (bundle === '') return; // nothing loaded yet: the signer's change queues everything again
    if (key === CTB_KEY) await this.#reconcileBundle(bundle);
    else await this.#reconcileNamespace(key.slice(NS_PREFIX.length), bundle);
  }

  async #write(what: Omit<PublishedWrite, 'result'>, fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
      this.#o.onWrite?.({ ...what, result: 'ok' });
    } catch (err) {
      this.#o.onWrite?.({ ...what, result: 'error' });
      throw err;
    }
  }

  async #reconcileNamespace(ns: string, bundle: string): Promise<void> {
    const nsObj = this.#namespaces.get(undefined, ns);
    if (!nsObj || nsObj.status?.phase === 'Terminating' || nsObj.metadata?.deletionTimestamp) return;
    const stored = this.#configMaps.get(ns, ROOT_CONFIGMAP_NAME);
    const { writer, logger } = this.#o;
    if (stored === undefined) {
      try {
        await this.#write({ object: 'configmap', action: 'create' }, () => writer.createConfigMap(ns, desiredConfigMap(ns, bundle), this.#signal));
        logger.info('root ConfigMap created', { namespace: ns });
      } catch (err) {
        const code = httpStatus(err);
        // As istiod: it exists already (the watch will show it), the namespace went away or is
        // terminating, or writing it there is not permitted: nothing to retry.
        if (code === 409 || code === 404) return;
        if (code === 403 || code === 400) {
          logger.warn('root ConfigMap not written', { namespace: ns, error: describeError(err) });
          return;
        }
        throw err;
      }
      return;
    }
    const next = configMapUpdate(stored, bundle);
    if (next === undefined) return;
    await this.#write({ object: 'configmap', action: 'update' }, () => writer.replaceConfigMap(ns, ROOT_CONFIGMAP_NAME, next, this.#signal));
    logger.info('root ConfigMap restored', { namespace: ns });
  }

  /** Deletes an owned bundle named after another signer, unless it changed since the informer saw it. */
  async #deleteStale(name: string): Promise<void> {
    const stored = this.#owned?.get(undefined, name);
    const uid = stored?.metadata?.uid;
    const resourceVersion = stored?.metadata?.resourceVersion;
    if (!stored || uid === undefined || resourceVersion === undefined || !isOwned(stored, this.#o.installation)) return;
    try {
      await this.#write({ object: 'clustertrustbundle', action: 'delete' }, () => this.#o.writer.deleteTrustBundle(name, { uid, resourceVersion }, this.#signal));
      this.#o.logger.info('old ClusterTrustBundle deleted', { name, signerName: stored.spec?.signerName });
    } catch (err) {
      // Gone already, or replaced/changed since it was read (the watch brings the new version,
      // which queues it again if it is still ours).
      if (httpStatus(err) === 404 || httpStatus(err) === 409) return;
      throw err;
    }
  }

  async #reconcileBundle(bundle: string): Promise<void> {
    const signer = this.#o.clusterTrustBundleSignerName;
    if (signer === undefined || !this.#bundles) return;
    const name = trustBundleName(signer);
    const stored = this.#bundles.get(undefined, name);
    const { writer, logger } = this.#o;
    if (stored === undefined) {
      try {
        await this.#write({ object: 'clustertrustbundle', action: 'create' }, () => writer.createTrustBundle(desiredTrustBundle(signer, bundle, this.#o.installation), this.#signal));
        logger.info('ClusterTrustBundle created', { name });
      } catch (err) {
        if (httpStatus(err) === 409) return; // the watch brings it, and with it another look
        throw err;
      }
      return;
    }
    const owner = stored.metadata?.labels?.[TRUST_BUNDLE_INSTALLATION_LABEL];
    if (owner !== undefined && owner !== this.#o.installation) {
      if (this.#warnedOwner !== owner) logger.warn('ClusterTrustBundle belongs to another CA installation; not written (give each installation its own signer name)', { name, owner, installation: this.#o.installation });
      this.#warnedOwner = owner;
      return;
    }
    const next = trustBundleUpdate(stored, signer, bundle, this.#o.installation);
    if (next === undefined) return;
    await this.#write({ object: 'clustertrustbundle', action: 'update' }, () => writer.replaceTrustBundle(name, next, this.#signal));
    logger.info('ClusterTrustBundle updated', { name });
  }
}
