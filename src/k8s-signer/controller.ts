/**
 * What a signing controller of `certbroker k8s-signer` is and what it gets: one controller per
 * Kubernetes API it signs for (CertificateSigningRequests: csr-controller.ts; others join in
 * k8s-signer.ts's CONTROLLERS). Each is a `LongLived` (start(signal)/stop(deadline)) with a
 * readiness answer; all of them share the plug-in CA, the signer name and trust domain, the
 * kube client, the clock and the metrics registry.
 */
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Signer } from '../ca/index.js';
import type { Clock } from '../core/clock.js';
import type { LongLived } from '../core/long-lived.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import { describeError } from '../core/errors.js';
import { settleWithin, stopOnAbort } from '../core/long-lived.js';
import { WorkQueue } from '../core/work-queue.js';
import type { Informer, InformerSettings, SignerNameInformerOptions } from '../kube/index.js';
import { SignerMetrics } from './metrics.js';

/** What handling one request came to: done, or retry (after a backoff) because `why`. */
export type HandleOutcome = { readonly done: true } | { readonly done: false; readonly why: string };

export interface SignerControllerContext {
  readonly kubeConfig: KubeConfig;
  /** The signerName this process signs for (`example.com/spiffe`). */
  readonly signerName: string;
  readonly trustDomain: string;
  /** The plug-in CA (cacerts directory or Secret): issues leaves, knows its roots. */
  readonly ca: Signer;
  /** Leaf lifetime when a request names none, and the most any request gets (seconds). */
  readonly defaultTtlSeconds: number;
  readonly maxTtlSeconds: number;
  /** Users who may get DNS/IP serving certificates (csr-policy.ts). */
  readonly servingRequesters: readonly string[];
  readonly informer: InformerSettings;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
}

export interface SignerController extends LongLived {
  /** For logs, readiness check names and metrics labels ("csr"). */
  readonly name: string;
  /** Undefined while the controller's view of its API is trustworthy (synced, not stale); else why not. */
  problem(): string | undefined;
}

export type SignerControllerFactory = (ctx: SignerControllerContext) => SignerController;

/** How a queued controller watches its API and queues its requests. */
export interface QueuedControllerSpec<T extends KubernetesObject> {
  /** For logs, readiness check names and metrics labels ("csr"). */
  readonly name: string;
  /** Requests handled at the same time; retry delays double from the first to the last, jittered. */
  readonly workers: number;
  readonly initialRetryMs: number;
  readonly maxRetryMs: number;
  /** The work-queue key of a request (its name, or namespace/name). */
  readonly keyOf: (request: T) => string;
  /** The informer on the requests of `signerName` (createCsrInformer, createPcrInformer). */
  readonly createInformer: (options: SignerNameInformerOptions<T>) => Informer<T>;
}

/**
 * A signing controller over an informer and a WorkQueue (core/work-queue.ts): every added or updated request is
 * queued by its key, a deleted one's failure count forgotten, and all of them queued again when
 * the CA changes (a CA that becomes ready or rotates may now sign what waited for it). Readiness
 * is the informer's; stop() stops the queue and the informer within the deadline, then
 * `stopped()`. A subclass says how one request is handled.
 */
export abstract class QueuedSignerController<T extends KubernetesObject> implements SignerController {
  readonly name: string;
  protected readonly informer: Informer<T>;
  protected readonly queue: WorkQueue<string>;
  protected readonly metrics: SignerMetrics;
  readonly #unsubscribe: () => void;

  constructor(ctx: SignerControllerContext, spec: QueuedControllerSpec<T>, metrics: SignerMetrics) {
    this.name = spec.name;
    this.metrics = metrics;
    this.queue = new WorkQueue<string>({
      workers: spec.workers,
      initialBackoffMs: spec.initialRetryMs,
      maxBackoffMs: spec.maxRetryMs,
      clock: ctx.clock,
      rng: ctx.rng,
      logger: ctx.logger,
      what: spec.name,
      process: async (key) => {
        try {
          const outcome = await this.handle(key);
          return outcome.done ? undefined : { retry: outcome.why };
        } catch (err) {
          // A handler that throws has a bug, not a reason to retry: logged, and the key left alone.
          ctx.logger.error(`${spec.name} handling threw`, { [spec.name]: key, err: describeError(err) });
          return undefined;
        }
      },
      onRetry: (_key, why) => metrics.count(spec.name, 'retried', why.split(':')[0]),
    });
    const enqueue = (request: T) => {
      const key = spec.keyOf(request);
      if (key !== '') this.queue.add(key);
    };
    this.informer = spec.createInformer({
      kubeConfig: ctx.kubeConfig,
      signerName: ctx.signerName,
      ...ctx.informer,
      clock: ctx.clock,
      rng: ctx.rng,
      logger: ctx.logger,
      onAdd: enqueue,
      onUpdate: enqueue,
      onDelete: (request) => this.queue.forget(spec.keyOf(request)),
    });
    this.#unsubscribe = ctx.ca.onChange(() => {
      for (const request of this.informer.list()) enqueue(request);
    });
  }

  /** Handles the request queued under `key`: done, or retry because ... */
  protected abstract handle(key: string): Promise<HandleOutcome>;

  /** Called once stop() has settled (or timed out): frees what the subclass holds. */
  protected stopped(): void {}

  problem(): string | undefined {
    return this.informer.problem();
  }

  async start(signal?: AbortSignal): Promise<void> {
    stopOnAbort(signal, () => this.stop());
    await this.informer.start(this.queue.signal);
  }

  async stop(deadlineMs = 5000): Promise<void> {
    this.#unsubscribe();
    const stopping = this.queue.stop();
    try {
      await settleWithin(Promise.all([this.informer.stop(deadlineMs), stopping]), deadlineMs);
    } finally {
      this.stopped();
    }
  }
}
