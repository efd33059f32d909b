/**
 * The repair controller: watches the pods on this node (the shared pod informer of src/kube with
 * `spec.nodeName=<node>`: paginated lists, 410 re-lists, backoff, idle watchdog), finds the ones that started before the CNI plugin was ready
 * (`brokenPodReason`), and labels or deletes them (repair-actions.ts), recording a Kubernetes
 * Event either way.
 * Failures are retried with backoff a bounded number of times; every API call has a deadline.
 *
 * Lifecycle (src/core/long-lived.ts): `startRepairController({ signal })` starts it; aborting
 * `signal` or `handle.stop(deadlineMs)` ends the queue, then the pod watch; `stopped` resolves then.
 */
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { settleWithin, stopOnAbort, type Stoppable } from '../../core/long-lived.js';
import { systemRng, type Rng } from '../../core/rng.js';
import { WorkQueue } from '../../core/work-queue.js';
import { abortableApi } from '../../kube/abortable-http.js';
import { createPodInformer, InformerMetrics } from '../../kube/index.js';
import { brokenPodReason } from './broken-pod.js';
import type { RepairConfig } from './config.js';
import { podKey, RepairActions } from './repair-actions.js';

export { EVENT_SOURCE, REASON_DELETE, REASON_LABEL } from './repair-actions.js';

export interface RepairControllerOptions {
  readonly config: RepairConfig;
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly clock: Clock;
  /** Aborting it stops the controller as `handle.stop()` does. */
  readonly signal?: AbortSignal;
  readonly rng?: Rng;
  /** First retry delay; doubles per attempt. */
  readonly retryBaseMs?: number;
  /** Bound of one repair API call (delete, label, event). Default 10 000. */
  readonly requestTimeoutMs?: number;
}

/** How long `handle.stop()` waits by default: API calls abort with the stop; the pod watch stops within 5 s. */
export const REPAIR_STOP_DEADLINE_MS = 10_000;

export interface RepairHandle extends Stoppable {
  /** Undefined while the pod watch can be trusted (listed, not stale); otherwise why not. */
  problem(): string | undefined;
  /** Resolves after `signal` aborted (or `stop()`) and the controller stopped. */
  readonly stopped: Promise<void>;
}

export async function startRepairController(options: RepairControllerOptions): Promise<RepairHandle> {
  const { config, kubeConfig, logger, clock } = options;
  const stopping = new AbortController();
  stopOnAbort(options.signal, () => stopping.abort(options.signal?.reason));
  const signal = stopping.signal;
  const actions = new RepairActions({
    api: (s) => abortableApi(kubeConfig, CoreV1Api, s),
    config,
    logger,
    registry: options.registry,
    clock,
    signal,
    ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
  });
  const fieldSelector = [config.fieldSelector, `spec.nodeName=${config.nodeName}`].filter((s) => s !== undefined && s !== '').join(',');

  const reconcile = async (key: string): Promise<void> => {
    const slash = key.indexOf('/');
    const pod = informer.get(key.slice(0, slash), key.slice(slash + 1));
    if (pod?.metadata?.name === undefined || pod.metadata.namespace === undefined) return;
    if (pod.metadata.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null) return;
    const reason = brokenPodReason(
      { annotations: pod.metadata.annotations, initContainerStatuses: pod.status?.initContainerStatuses },
      config.criteria,
    );
    if (reason === undefined) return;
    logger.info('pod started before the CNI plugin was ready', { pod: key, reason, action: config.mode });
    if (config.mode === 'delete') await actions.deletePod(pod);
    else await actions.labelPod(pod);
  };

  const queue = new WorkQueue<string>({
    clock,
    rng: options.rng ?? systemRng,
    logger,
    what: 'pod',
    maxAttempts: config.maxAttempts,
    initialBackoffMs: options.retryBaseMs ?? 500,
    maxBackoffMs: 30_000,
    process: reconcile,
    onGiveUp: (key, err, attempts) =>
      logger.error('giving up on pod until it changes', { pod: key, attempts, err: describeError(err) }),
  });
  const enqueue = (pod: V1Pod) => {
    if (pod.metadata?.name && pod.metadata.namespace) queue.add(podKey(pod.metadata.namespace, pod.metadata.name));
  };
  const informer = createPodInformer({
    ...config.informer,
    kubeConfig,
    clock,
    rng: options.rng ?? systemRng,
    logger,
    fieldSelector,
    ...(config.labelSelector !== undefined ? { labelSelector: config.labelSelector } : {}),
    onAdd: enqueue,
    onUpdate: (pod) => enqueue(pod),
    onDelete: (pod) => actions.forget(pod.metadata?.uid ?? ''),
  });
  new InformerMetrics(options.registry).track(informer);
  informer.start();

  const worker = new Promise<void>((resolve) => stopOnAbort(signal, () => queue.stop().then(resolve)));
  const stopped = (async () => {
    await worker;
    await informer.stop();
  })();
  logger.info('repair controller started', { node: config.nodeName, mode: config.mode, fieldSelector });
  return {
    problem: () => informer.problem(),
    stopped,
    async stop(deadlineMs = REPAIR_STOP_DEADLINE_MS) {
      stopping.abort();
      await settleWithin(stopped, deadlineMs);
    },
  };
}
