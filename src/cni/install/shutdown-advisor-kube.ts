/**
 * Kubernetes adapter for the upgrade-or-uninstall decision: reads this pod's DaemonSet and
 * this node once, at shutdown, with a deadline, and hands the facts to `decideOnShutdown`.
 * Any API failure other than "DaemonSet not found" keeps the plugin in place (the safe side).
 */
import { ApiException, AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
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
  /** Upper bound for the API calls; SIGTERM's grace period is short. */
  readonly timeoutMs: number;
}

function withDeadline<T>(work: Promise<T>, clock: Clock, ms: number): Promise<T> {
  const stop = new AbortController();
  const timeout = clock.sleep(ms, stop.signal).then(() => {
    throw new Error(`no answer from the API server within ${ms} ms`);
  });
  return Promise.race([work, timeout]).finally(() => stop.abort());
}

export class KubeShutdownAdvisor implements ShutdownAdvisor {
  readonly #o: KubeShutdownAdvisorOptions;

  constructor(options: KubeShutdownAdvisorOptions) {
    this.#o = options;
  }

  async decide(): Promise<ShutdownDecision> {
    const { kubeConfig, namespace, daemonSetName, nodeName, clock, timeoutMs, logger } = this.#o;
    let daemonSet: DaemonSetFacts | undefined;
    try {
      const ds = await withDeadline(
        kubeConfig.makeApiClient(AppsV1Api).readNamespacedDaemonSet({ name: daemonSetName, namespace }),
        clock,
        timeoutMs,
      );
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
        const n = await withDeadline(kubeConfig.makeApiClient(CoreV1Api).readNode({ name: nodeName }), clock, timeoutMs);
        node = { name: nodeName, labels: n.metadata?.labels ?? {} };
      } catch (err) {
        logger.warn('cannot read this node; judging the DaemonSet without node labels', { node: nodeName, err: describeError(err) });
      }
    }
    return decideOnShutdown({ daemonSetName, daemonSet, node });
  }
}
