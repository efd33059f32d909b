/**
 * A Workload API caller -> its pod, or the refusal the SPIFFE Workload Endpoint prescribes: a
 * caller the broker has no identity for gets PERMISSION_DENIED (a process in no pod's cgroup, a
 * pod not on this node or not known yet, a host-network or otherwise ineligible pod, a process
 * that exited or whose PID was reused); an attestation that could not be made is UNAVAILABLE
 * (the client retries). Plain TypeScript over the cache room's `NodePods`.
 */
import type { AttestedProcess, ConnectionAttestation } from '../../attestation/index.js';
import type { NodePods, TrackedPod } from '../../cache/index.js';
import { BrokerError } from '../../errors.js';
import type { CallerLookup } from './attested-connections.js';

/** The caller of a call: its process (re-checked before every message) and its pod. */
export interface WorkloadCaller {
  readonly process: AttestedProcess;
  readonly pod: TrackedPod;
}

export function notAttested(reason: string, detail: string): BrokerError {
  return new BrokerError('ERR_CALLER_NOT_ATTESTED', `Workload API caller has no identity: ${detail}`, {
    status: 'permission-denied',
    publicMessage: `caller has no identity on this node (${reason})`,
  });
}

/** The pod of an attested process, as the node's pods have it now. */
export function podOfProcess(process: AttestedProcess, pods: NodePods): TrackedPod {
  const uid = process.pod.podUid;
  const pod = pods.byUid(uid);
  if (pod) return pod;
  const idle = pods.ineligibleByUid(uid);
  if (idle) throw notAttested(idle.eligibility, `pod ${idle.namespace}/${idle.name} (${uid}) gets no identity: ${idle.eligibility}`);
  throw notAttested('pod-not-on-node', `process ${process.pid} is in pod ${uid}, which is not a pod of this node (or not known yet)`);
}

/** The caller of a connection (the stream re-checks it before each message, the first included). Throws the refusal. */
export function resolveCaller(attestation: ConnectionAttestation | undefined, pods: NodePods): WorkloadCaller {
  if (!attestation) {
    throw new BrokerError('ERR_ATTESTATION_UNAVAILABLE', 'call on a connection that was not attested', { status: 'unavailable', publicMessage: 'caller attestation is unavailable' });
  }
  if (!attestation.ok) {
    if (attestation.reason === 'unavailable') {
      throw new BrokerError('ERR_ATTESTATION_UNAVAILABLE', `attestation failed: ${attestation.detail}`, {
        status: 'unavailable',
        publicMessage: 'caller attestation is unavailable',
        cause: attestation.error,
      });
    }
    throw notAttested(attestation.reason, attestation.detail);
  }
  return { process: attestation.process, pod: podOfProcess(attestation.process, pods) };
}

/** `caller` is still that process, in that pod, entitled to that identity (before each message). Throws the refusal. */
export function stillCaller(caller: WorkloadCaller, callers: CallerLookup, pods: NodePods): WorkloadCaller {
  const again = callers.recheck(caller.process);
  if (!again.ok) throw notAttested(again.reason, again.detail);
  const pod = podOfProcess(caller.process, pods);
  if (pod.identity !== caller.pod.identity) throw notAttested('identity-changed', `pod ${pod.uid} now holds ${pod.identity}`);
  return caller;
}
