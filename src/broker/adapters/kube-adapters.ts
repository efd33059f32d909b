/**
 * The broker's Kubernetes edges (@kubernetes/client-node): the node pod watch (the shared
 * informer of src/kube with `fieldSelector=spec.nodeName=<node>`), pod lookups for CNI
 * registrations, TokenRequest for the broker's own token bound to its own pod, and the
 * projected-token-file fallback.
 */
import { readFile } from 'node:fs/promises';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { decodeJwt } from 'jose';
import type { InformerMetrics } from '../../kube/informer-metrics.js';
import type { InformerSettings } from '../../kube/informer-settings.js';
import { createPodInformer, type PodInformer } from '../../kube/pod-informer.js';
import { abortableApi } from '../../kube/abortable-http.js';
import type { Clock } from '../../core/clock.js';
import { withDeadline } from '../../core/deadline.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { Rng } from '../../core/rng.js';
import { Secret } from '../../core/secret.js';
import type { NodePods, PodFacts } from '../cache/node-pods.js';
import type { PodLookup } from './registration-server.js';
import type { FetchedToken, TokenFetcher } from './token-source.js';

export function podFacts(p: V1Pod): PodFacts | undefined {
  const m = p.metadata;
  if (!m?.name || !m.namespace || !m.uid) return undefined;
  return {
    uid: m.uid,
    namespace: m.namespace,
    name: m.name,
    // Never defaulted: the API server sets it on every ordinary pod; an empty one (a mirror pod)
    // means no identity (NodePods: 'no-service-account').
    serviceAccount: p.spec?.serviceAccountName ?? '',
    nodeName: p.spec?.nodeName ?? '',
    hostNetwork: p.spec?.hostNetwork === true,
    deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
    phase: p.status?.phase,
  };
}

function httpStatusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown; body?: { code?: unknown } };
  for (const v of [e?.code, e?.statusCode, e?.body?.code]) if (typeof v === 'number') return v;
  return undefined;
}

/**
 * Reads one pod straight from the API server (fresh, unlike the watch cache). The request
 * honours `signal` (the registration's deadline, or its client going away): aborting it closes
 * its connection, so an API server that never answers holds nothing.
 */
export function kubePodLookup(kubeConfig: KubeConfig): PodLookup {
  return async (namespace, name, signal) => {
    try {
      const pod = await abortableApi(kubeConfig, CoreV1Api, signal).readNamespacedPod({ namespace, name });
      return podFacts(pod);
    } catch (err) {
      if (httpStatusOf(err) === 404) return undefined;
      throw err;
    }
  };
}

export interface OwnPod {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly serviceAccount: string;
}

/** How long one TokenRequest may take before it is abandoned (and retried with backoff). */
export const TOKEN_REQUEST_TIMEOUT_MS = 10_000;

/** TokenRequest for the broker's own service account, bound to its own pod; abandoned after `timeoutMs` or on `signal`. */
export function tokenRequestFetcher(
  kubeConfig: KubeConfig,
  options: { readonly pod: OwnPod; readonly audience: string; readonly expirationSeconds: number; readonly timeoutMs?: number },
): TokenFetcher {
  return async (signal): Promise<FetchedToken> => {
    const { pod } = options;
    const request = {
      name: pod.serviceAccount,
      namespace: pod.namespace,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          audiences: [options.audience],
          expirationSeconds: options.expirationSeconds,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid },
        },
      },
    };
    const what = `TokenRequest for ${pod.namespace}/${pod.serviceAccount}`;
    const res = await withDeadline(options.timeoutMs ?? TOKEN_REQUEST_TIMEOUT_MS, { what, parent: signal }, (s) =>
      abortableApi(kubeConfig, CoreV1Api, s).createNamespacedServiceAccountToken(request),
    );
    const token = res.status?.token;
    if (!token) throw new Error('TokenRequest answered without a token');
    const exp = res.status?.expirationTimestamp;
    const expiresAt = exp ? new Date(exp).getTime() : jwtExpiry(token);
    if (!Number.isFinite(expiresAt)) throw new Error('TokenRequest answered without an expiration');
    return { token: new Secret(token), expiresAt, source: 'token-request' };
  };
}

/** The projected service-account token file; expiry from the JWT's `exp` claim. */
export function projectedTokenFileFetcher(path: string): TokenFetcher {
  return async (): Promise<FetchedToken> => {
    const token = (await readFile(path, 'utf8')).trim();
    if (token === '') throw new Error(`token file ${path} is empty`);
    const expiresAt = jwtExpiry(token);
    if (!Number.isFinite(expiresAt)) throw new Error(`token in ${path} has no exp claim`);
    return { token: new Secret(token), expiresAt, source: 'file' };
  };
}

/** The `exp` claim (ms) of a JWT without verifying it (the CA verifies; we only schedule). */
function jwtExpiry(jwt: string): number {
  try {
    const { exp } = decodeJwt(jwt);
    return typeof exp === 'number' ? exp * 1000 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

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
