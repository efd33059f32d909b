/**
 * The broker's Kubernetes edges (@kubernetes/client-node): the node pod watch
 * (`fieldSelector=spec.nodeName=<node>`, re-list on 410 by ListWatch, reconnect with backoff on
 * errors), pod lookups for CNI registrations, TokenRequest for the broker's own token bound to
 * its own pod, and the projected-token-file fallback.
 */
import { readFile } from 'node:fs/promises';
import { CoreV1Api, ListWatch, Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Clock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import { Secret } from '../core/secret.js';
import type { NodePods, PodFacts } from './node-pods.js';
import { backoff } from './refresh-policy.js';
import type { PodLookup } from './registration-server.js';
import type { FetchedToken, TokenFetcher } from './token-source.js';

export function podFacts(p: V1Pod): PodFacts | undefined {
  const m = p.metadata;
  if (!m?.name || !m.namespace || !m.uid) return undefined;
  return {
    uid: m.uid,
    namespace: m.namespace,
    name: m.name,
    serviceAccount: p.spec?.serviceAccountName || 'default',
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

/** Reads one pod straight from the API server (fresh, unlike the watch cache). */
export function kubePodLookup(kubeConfig: KubeConfig): PodLookup {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  return async (namespace, name) => {
    try {
      const pod = await api.readNamespacedPod({ namespace, name });
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

/** TokenRequest for the broker's own service account, bound to its own pod. */
export function tokenRequestFetcher(
  kubeConfig: KubeConfig,
  options: { readonly pod: OwnPod; readonly audience: string; readonly expirationSeconds: number },
): TokenFetcher {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  return async (): Promise<FetchedToken> => {
    const { pod } = options;
    const res = await api.createNamespacedServiceAccountToken({
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
    });
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
export function jwtExpiry(jwt: string): number {
  const payload = jwt.split('.')[1];
  if (!payload) return Number.NaN;
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof claims.exp === 'number' ? claims.exp * 1000 : Number.NaN;
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
}

/** Watches the pods of one node into `NodePods`. */
export class NodePodWatch {
  readonly #o: NodePodWatchOptions;
  readonly #informer: ListWatch<V1Pod>;
  readonly #stop = new AbortController();
  #synced = false;
  #restarting = false;
  #restarts = 0;

  constructor(options: NodePodWatchOptions) {
    this.#o = options;
    const api = options.kubeConfig.makeApiClient(CoreV1Api);
    const fieldSelector = `spec.nodeName=${options.nodeName}`;
    this.#informer = new ListWatch<V1Pod>(
      '/api/v1/pods',
      new Watch(options.kubeConfig),
      () => api.listPodForAllNamespaces({ fieldSelector }),
      false,
      undefined,
      fieldSelector,
    );
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
    this.#informer.on('add', upsert);
    this.#informer.on('update', upsert);
    this.#informer.on(
      'delete',
      guarded('delete', (p) => {
        if (p.metadata?.uid) options.pods.remove(p.metadata.uid);
      }),
    );
    this.#informer.on('error', (err: unknown) => this.#restart(err));
  }

  /** The first full list has been applied. */
  get synced(): boolean {
    return this.#synced;
  }

  get restarts(): number {
    return this.#restarts;
  }

  /** Starts; resolves after the first list, or keeps retrying in the background if it fails. */
  async start(): Promise<void> {
    try {
      await this.#informer.start();
      this.#synced = true;
      this.#o.logger.info('node pod watch synced', { node: this.#o.nodeName, pods: this.#o.pods.size });
    } catch (err) {
      this.#restart(err);
    }
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#informer.stop();
  }

  #restart(err: unknown): void {
    if (this.#restarting || this.#stop.signal.aborted) return;
    this.#restarting = true;
    this.#restarts++;
    this.#o.logger.warn('node pod watch failed, reconnecting', { err: describeError(err) });
    void (async () => {
      for (let attempt = 0; !this.#stop.signal.aborted; attempt++) {
        try {
          await this.#o.clock.sleep(Math.min(backoff(attempt, this.#o.rng), 30_000), this.#stop.signal);
          await this.#informer.start();
          this.#synced = true;
          break;
        } catch (e) {
          if (this.#stop.signal.aborted) break;
          this.#o.logger.warn('node pod list failed, retrying', { err: describeError(e) });
        }
      }
      this.#restarting = false;
    })().catch(() => undefined);
  }
}
