/**
 * Which pods started before the CNI plugin was ready. Istio's signal: the `istio-validation`
 * init container (which checks the pod's traffic redirection) exited with code 126. Pure over
 * the few pod fields it reads, so the rules are tested without a cluster.
 *
 * Safety first: a validation container whose current state is a successful exit is never
 * considered broken, whatever its history says.
 */

export interface TerminatedState {
  readonly exitCode: number;
  readonly reason?: string | undefined;
  readonly message?: string | undefined;
}

export interface ContainerStatusFacts {
  readonly name: string;
  readonly state?: { readonly terminated?: TerminatedState | undefined } | undefined;
  readonly lastState?: { readonly terminated?: TerminatedState | undefined } | undefined;
}

export interface PodFacts {
  readonly annotations?: Readonly<Record<string, string>> | undefined;
  readonly initContainerStatuses?: readonly ContainerStatusFacts[] | undefined;
}

export interface BrokenPodCriteria {
  /** Only pods with this annotation are candidates ('' = every pod). */
  readonly sidecarAnnotation: string;
  /** The validation init container's name ('' = any init container). */
  readonly initContainerName: string;
  /** The exit code that means "started before the plugin" (0 = any non-zero code). */
  readonly initExitCode: number;
  /** Required termination message, compared trimmed ('' = any). */
  readonly initTerminationMessage: string;
}

export const DEFAULT_BROKEN_POD_CRITERIA: BrokenPodCriteria = Object.freeze({
  sidecarAnnotation: '',
  initContainerName: 'istio-validation',
  initExitCode: 126,
  initTerminationMessage: '',
});

function matches(state: TerminatedState, criteria: BrokenPodCriteria): boolean {
  if (state.exitCode === 0) return false;
  if (criteria.initExitCode !== 0 && state.exitCode !== criteria.initExitCode) return false;
  const wanted = criteria.initTerminationMessage.trim();
  return wanted === '' || wanted === (state.message ?? '').trim();
}

/** A short reason when the pod shows the failed-validation signature, else undefined. */
export function brokenPodReason(pod: PodFacts, criteria: BrokenPodCriteria): string | undefined {
  if (criteria.sidecarAnnotation !== '' && !Object.hasOwn(pod.annotations ?? {}, criteria.sidecarAnnotation)) return undefined;
  for (const status of pod.initContainerStatuses ?? []) {
    if (criteria.initContainerName !== '' && status.name !== criteria.initContainerName) continue;
    const current = status.state?.terminated;
    if (current !== undefined && (current.exitCode === 0 || current.reason === 'Completed')) continue;
    if (current !== undefined && matches(current, criteria)) {
      return `init container ${status.name} terminated with exit code ${current.exitCode}`;
    }
    const last = status.lastState?.terminated;
    if (last !== undefined && matches(last, criteria)) {
      return `init container ${status.name} last terminated with exit code ${last.exitCode}`;
    }
  }
  return undefined;
}
