/**
 * The repair controller: watches the pods on this node (the shared pod informer of src/kube with
 * `spec.nodeName=<node>`: paginated lists, 410 re-lists, backoff, idle watchdog), finds the ones that started before the CNI plugin was ready
 * (`brokenPodReason`), and labels them through the pods/status subresource or deletes them
 * with UID + resourceVersion preconditions, recording a Kubernetes Event either way.
 * Failures are retried with backoff a bounded number of times.
 */
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { systemRng, type Rng } from '../../core/rng.js';
import { createPodInformer, InformerMetrics } from '../../kube/index.js';
import { brokenPodReason } from './broken-pod.js';
import type { RepairConfig } from './config.js';
import { RepairError } from './errors.js';
import { RetryQueue } from './retry-queue.js';

export const EVENT_SOURCE = 'cni-repair';
export const REASON_DELETE = 'DeleteBrokenPod';
export const REASON_LABEL = 'LabelBrokenPod';

export interface RepairControllerOptions {
  readonly config: RepairConfig;
  readonly kubeConfig: KubeConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly clock: Clock;
  readonly signal: AbortSignal;
  readonly rng?: Rng;
  /** First retry delay; doubles per attempt. */
  readonly retryBaseMs?: number;
}

export interface RepairHandle {
  /** Undefined while the pod watch can be trusted (listed, not stale); otherwise why not. */
  problem(): string | undefined;
  /** Resolves after `signal` aborted and the controller stopped. */
  readonly stopped: Promise<void>;
}

function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function status(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

export async function startRepairController(options: RepairControllerOptions): Promise<RepairHandle> {
  const { config, kubeConfig, logger, clock, signal } = options;
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const repaired = new Counter({
    name: 'certbroker_cni_repair_pods_total',
    help: 'Pods found broken by the repair controller, by action and result',
    labelNames: ['type', 'result'],
    registers: [options.registry],
  });
  const fieldSelector = [config.fieldSelector, `spec.nodeName=${config.nodeName}`].filter((s) => s !== undefined && s !== '').join(',');
  const recordEvent = async (pod: V1Pod, reason: string, message: string): Promise<void> => {
    const m = pod.metadata!;
    const now = new Date();
    try {
      await api.createNamespacedEvent({
        namespace: m.namespace!,
        body: {
          metadata: { name: `${m.name}.${now.getTime().toString(16)}${randomBytes(2).toString('hex')}`, namespace: m.namespace! },
          involvedObject: { apiVersion: 'v1', kind: 'Pod', name: m.name!, namespace: m.namespace!, uid: m.uid!, resourceVersion: m.resourceVersion! },
          reason,
          message,
          type: 'Warning',
          source: { component: EVENT_SOURCE, host: config.nodeName },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
          reportingComponent: EVENT_SOURCE,
          reportingInstance: config.nodeName,
        },
      });
    } catch (err) {
      logger.warn('cannot record event', { pod: podKey(m.namespace!, m.name!), reason, err: describeError(err) });
    }
  };

  /**
   * One repair action on `pod`: a 404 means the pod is already gone (nothing left to repair);
   * any other failure is counted, recorded as an event and thrown, so the queue retries.
   * Returns whether the action was carried out.
   */
  const act = async (pod: V1Pod, type: 'delete' | 'label', reason: string, call: () => Promise<void>): Promise<boolean> => {
    const m = pod.metadata!;
    try {
      await call();
    } catch (err) {
      if (status(err) === 404) return false;
      repaired.inc({ type, result: 'fail' });
      await recordEvent(pod, reason, `pod detected as broken, but failed to ${type}: ${describeError(err)}`);
      throw new RepairError('ERR_REPAIR_ACTION_FAILED', `${type} ${podKey(m.namespace!, m.name!)}: ${describeError(err)}`, err);
    }
    repaired.inc({ type, result: 'success' });
    await recordEvent(pod, reason, `pod detected as broken, ${type === 'delete' ? 'deleted' : 'labeled'}`);
    return true;
  };

  const deletePod = async (pod: V1Pod): Promise<void> => {
    const m = pod.metadata!;
    const done = await act(pod, 'delete', REASON_DELETE, async () => {
      await api.deleteNamespacedPod({
        name: m.name!,
        namespace: m.namespace!,
        body: { preconditions: { uid: m.uid!, resourceVersion: m.resourceVersion! } },
      });
    });
    if (done) logger.info('deleted broken pod', { pod: podKey(m.namespace!, m.name!), uid: m.uid });
  };

  // UIDs this controller labelled: the label patch itself triggers a watch update, and a pod
  // is labelled once per incarnation even if the label is later removed by someone else.
  const labelled = new Set<string>();

  const labelPod = async (pod: V1Pod): Promise<void> => {
    const m = pod.metadata!;
    if (Object.hasOwn(m.labels ?? {}, config.labelKey) || labelled.has(m.uid ?? '')) {
      repaired.inc({ type: 'label', result: 'skip' });
      return;
    }
    const done = await act(pod, 'label', REASON_LABEL, async () => {
      // pods/status may change metadata too, and is the lower privilege of the two.
      await api.patchNamespacedPodStatus(
        { name: m.name!, namespace: m.namespace!, body: { metadata: { labels: { [config.labelKey]: config.labelValue } } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      labelled.add(m.uid ?? '');
    });
    if (done) logger.info('labelled broken pod', { pod: podKey(m.namespace!, m.name!), label: `${config.labelKey}=${config.labelValue}` });
  };

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
    if (config.mode === 'delete') await deletePod(pod);
    else await labelPod(pod);
  };

  const queue = new RetryQueue({
    clock,
    rng: options.rng ?? systemRng,
    maxAttempts: config.maxAttempts,
    baseDelayMs: options.retryBaseMs ?? 500,
    maxDelayMs: 30_000,
    handle: reconcile,
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
    onDelete: (pod) => labelled.delete(pod.metadata?.uid ?? ''),
  });
  new InformerMetrics(options.registry).track(informer);
  informer.start();

  const worker = queue.run(signal);
  const stopped = (async () => {
    await worker;
    await informer.stop();
  })();
  logger.info('repair controller started', { node: config.nodeName, mode: config.mode, fieldSelector });
  return {
    problem: () => informer.problem(),
    stopped,
  };
}
