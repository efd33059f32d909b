/**
 * Who decides, at SIGTERM, whether install-cni uninstalls the plugin or leaves it for the
 * next pod (an upgrade). The Kubernetes-backed advisor lives in shutdown-advisor-kube.ts.
 */
import type { ShutdownDecision } from './upgrade-policy.js';

export interface ShutdownAdvisor {
  decide(): Promise<ShutdownDecision>;
}

/** A fixed answer (UNINSTALL_ON_EXIT=always|never). */
export function fixedShutdownAdvisor(decision: ShutdownDecision): ShutdownAdvisor {
  return { decide: () => Promise.resolve(decision) };
}
