/**
 * Kubernetes adapter for the upgrade-or-uninstall decision: reads this pod's DaemonSet and
 * this node once, at shutdown, both within one deadline (`timeoutMs`), and hands the facts to
 * `decideOnShutdown`. Any API failure other than "DaemonSet not found" keeps the plugin in place
 * (the safe side). At the deadline the requests are aborted and their connections closed:
 * a hung API server costs the shutdown `timeoutMs`, never more, and holds no socket after it.
 */
import { ApiException, AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../core/clock.js';
import { deadline } from '../../core/deadline.js';
import { describeError } from '../../core/errors.js';
import { abortableApi } from '../../kube/abortable-http.js';
import type { Logger } from '../../core/log.js';
import type { ShutdownAdvisor } from './shutdown-advisor.js';
import { decideOnShutdown, type DaemonSetFacts, type NodeFacts, type ShutdownDecision } from './upgrade-policy.js';

export interface KubeShutdownAdvisorOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly daemonSetName: string;
  readonly nodeName: string;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Upper bound for both API calls together; SIGTERM's grace period is short. */
  readonly timeoutMs: number;
}

export class KubeShutdownAdvisor implements ShutdownAdvisor {
  readonly #o: KubeShutdownAdvisorOptions;

  constructor(options: KubeShutdownAdvisorOptions) {
    this.#o = options;
  }

  async decide(): Promise<ShutdownDecision> {
    const limit = deadline(this.#o.timeoutMs, { what: 'upgrade check', clock: this.#o.clock });
    try {
      return await this.#decide(limit.signal);
    } finally {
      limit.dispose();
    }
  }

  async #decide(signal: AbortSignal): Promise<ShutdownDecision> {
    const { kubeConfig, namespace, daemonSetName, nodeName, logger } = this.#o;
    let daemonSet: DaemonSetFacts | undefined;
    try {
      const ds = await abortableApi(kubeConfig, AppsV1Api, signal).readNamespacedDaemonSet({ name: daemonSetName, namespace });
      const podSpec = ds.spec?.template.spec;
      daemonSet = {
        deletionTimestamp: ds.metadata?.deletionTimestamp,
        nodeSelector: podSpec?.nodeSelector,
        requiredNodeSelectorTerms: podSpec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms,
      };
    } catch (err) {
      if (err instanceof ApiException && err.code === 404) {
        daemonSet = undefined;
      } else {
        const reason = `cannot read DaemonSet ${namespace}/${daemonSetName} (${describeError(err)}); keeping the plugin`;
        logger.warn('upgrade check failed', { reason });
        return { action: 'keep', reason };
      }
    }
    let node: NodeFacts | undefined;
    if (daemonSet !== undefined) {
      try {
        const n = await abortableApi(kubeConfig, CoreV1Api, signal).readNode({ name: nodeName });
        node = { name: nodeName, labels: n.metadata?.labels ?? {} };
      } catch (err) {
        logger.warn('cannot read this node; judging the DaemonSet without node labels', { node: nodeName, err: describeError(err) });
      }
    }
    return decideOnShutdown({ daemonSetName, daemonSet, node });
  }
}
