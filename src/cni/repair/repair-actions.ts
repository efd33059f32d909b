/**
 * What the repair controller does to one broken pod: delete it (with UID + resourceVersion
 * preconditions, so a newer incarnation is never hit) or label it through the pods/status
 * subresource (the lower privilege), each counted by action and result and recorded as a
 * Kubernetes Event on the pod. Every API call is abandoned (its connection closed) after
 * `requestTimeoutMs` or when the controller stops (`signal`).
 */
import { ApiException, PatchStrategy, setHeaderOptions, type CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../../core/clock.js';
import { withDeadline } from '../../core/deadline.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import type { RepairConfig } from './config.js';
import { RepairError } from './errors.js';

export const EVENT_SOURCE = 'cni-repair';
export const REASON_DELETE = 'DeleteBrokenPod';
export const REASON_LABEL = 'LabelBrokenPod';

export function podKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

function status(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

export interface RepairActionsOptions {
  /** A client whose requests honour `signal` (kube/abortable-http's `abortableApi`). */
  readonly api: (signal: AbortSignal) => CoreV1Api;
  readonly config: RepairConfig;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly clock: Clock;
  /** The controller's stop: aborts calls in flight. */
  readonly signal: AbortSignal;
  /** Bound of one API call (delete, label, event). Default 10 000. */
  readonly requestTimeoutMs?: number;
}

export class RepairActions {
  readonly #o: RepairActionsOptions;
  readonly #repaired: Counter;
  // UIDs this controller labelled: the label patch itself triggers a watch update, and a pod
  // is labelled once per incarnation even if the label is later removed by someone else.
  readonly #labelled = new Set<string>();

  constructor(options: RepairActionsOptions) {
    this.#o = options;
    this.#repaired = new Counter({
      name: 'certbroker_cni_repair_pods_total',
      help: 'Pods found broken by the repair controller, by action and result',
      labelNames: ['type', 'result'],
      registers: [options.registry],
    });
  }

  async deletePod(pod: V1Pod): Promise<void> {
    const m = pod.metadata!;
    const done = await this.#act(pod, 'delete', REASON_DELETE, async () => {
      await this.#call('delete pod', (api) =>
        api.deleteNamespacedPod({
          name: m.name!,
          namespace: m.namespace!,
          body: { preconditions: { uid: m.uid!, resourceVersion: m.resourceVersion! } },
        }),
      );
    });
    if (done) this.#o.logger.info('deleted broken pod', { pod: podKey(m.namespace!, m.name!), uid: m.uid });
  }

  async labelPod(pod: V1Pod): Promise<void> {
    const m = pod.metadata!;
    const { labelKey, labelValue } = this.#o.config;
    if (Object.hasOwn(m.labels ?? {}, labelKey) || this.#labelled.has(m.uid ?? '')) {
      this.#repaired.inc({ type: 'label', result: 'skip' });
      return;
    }
    const done = await this.#act(pod, 'label', REASON_LABEL, async () => {
      // pods/status may change metadata too, and is the lower privilege of the two.
      await this.#call('label pod', (api) =>
        api.patchNamespacedPodStatus(
          { name: m.name!, namespace: m.namespace!, body: { metadata: { labels: { [labelKey]: labelValue } } } },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        ),
      );
      this.#labelled.add(m.uid ?? '');
    });
    if (done) this.#o.logger.info('labelled broken pod', { pod: podKey(m.namespace!, m.name!), label: `${labelKey}=${labelValue}` });
  }

  /** One API call with its own deadline, abandoned when the controller stops. */
  #call<T>(what: string, fn: (api: CoreV1Api) => Promise<T>): Promise<T> {
    return withDeadline(this.#o.requestTimeoutMs ?? 10_000, { what, parent: this.#o.signal, clock: this.#o.clock }, (s) => fn(this.#o.api(s)));
  }

  /** The pod (this incarnation, by UID) is gone: forget that it was labelled. */
  forget(uid: string): void {
    this.#labelled.delete(uid);
  }

  /**
   * One repair action on `pod`: a 404 means the pod is already gone (nothing left to repair);
   * any other failure is counted, recorded as an event and thrown, so the queue retries.
   * Returns whether the action was carried out.
   */
  async #act(pod: V1Pod, type: 'delete' | 'label', reason: string, call: () => Promise<void>): Promise<boolean> {
    const m = pod.metadata!;
    try {
      await call();
    } catch (err) {
      if (status(err) === 404) return false;
      this.#repaired.inc({ type, result: 'fail' });
      await this.#recordEvent(pod, reason, `pod detected as broken, but failed to ${type}: ${describeError(err)}`);
      throw new RepairError('ERR_REPAIR_ACTION_FAILED', `${type} ${podKey(m.namespace!, m.name!)}: ${describeError(err)}`, err);
    }
    this.#repaired.inc({ type, result: 'success' });
    await this.#recordEvent(pod, reason, `pod detected as broken, ${type === 'delete' ? 'deleted' : 'labeled'}`);
    return true;
  }

  async #recordEvent(pod: V1Pod, reason: string, message: string): Promise<void> {
    const m = pod.metadata!;
    const node = this.#o.config.nodeName;
    const now = new Date();
    try {
      const event = {
        namespace: m.namespace!,
        body: {
          metadata: { name: `${m.name}.${now.getTime().toString(16)}${randomBytes(2).toString('hex')}`, namespace: m.namespace! },
          involvedObject: { apiVersion: 'v1', kind: 'Pod', name: m.name!, namespace: m.namespace!, uid: m.uid!, resourceVersion: m.resourceVersion! },
          reason,
          message,
          type: 'Warning',
          source: { component: EVENT_SOURCE, host: node },
          firstTimestamp: now,
          lastTimestamp: now,
          count: 1,
          reportingComponent: EVENT_SOURCE,
          reportingInstance: node,
        },
      };
      await this.#call('create event', (api) => api.createNamespacedEvent(event));
    } catch (err) {
      this.#o.logger.warn('cannot record event', { pod: podKey(m.namespace!, m.name!), reason, err: describeError(err) });
    }
  }
}
