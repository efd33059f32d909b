/**
 * Which pod of this node a Broker API request names, and whether this caller may name it that
 * way. A reference is a `KubernetesObjectReference` (pod by UID, by namespace/name, or both) or a
 * `WorkloadPIDReference` (a process of the node: `/proc/<pid>/cgroup` -> the pod kubelet placed it
 * in, through the attestation room, read when the call arrives; the stream then follows that pod as
 * one by UID would). Each kind has its own allow-list of callers (`BROKER_KUBERNETES_REFERENCE_CALLERS`,
 * `BROKER_PID_REFERENCE_CALLERS`; default: every caller of the Broker API).
 *
 * Answers: a reference that does not decode or names nothing valid is INVALID_ARGUMENT
 * (WORKLOAD_REFERENCE_INVALID; code ERR_REQUEST_MALFORMED or ERR_WORKLOAD_REFERENCE_INVALID); a
 * kind this caller may not use PERMISSION_DENIED (REFERENCE_TYPE_NOT_ALLOWED); no such pod on
 * this node — or a PID that is gone, in no pod, in a pod of another node — NOT_FOUND
 * (WORKLOAD_NOT_FOUND); a pod of this node that gets no identity PERMISSION_DENIED
 * (WORKLOAD_NOT_ENTITLED).
 */
import type { ProcessAttestor } from '../../attestation/process-attestor.js';
import type { IneligiblePod, NodePods, TrackedPod } from '../../cache/node-pods.js';
import { BrokerError } from '../../errors.js';
import type { ReferenceKind, WorkloadRequest } from '../../../protocol/spiffe-broker.js';
import { describePodReference, parseReference, type PodReference, type WorkloadRef } from './workload-reference.js';

/** The pod a process runs in, by the kernel's word (or why there is none). */
export interface PidResolver {
  podOf(pid: number): { readonly ok: true; readonly podUid: string } | { readonly ok: false; readonly reason: string; readonly detail: string };
}

/** A `PidResolver` over the attestation room's `ProcessAttestor` (a process started after the call is not the one named). */
export function attestorPidResolver(attestor: ProcessAttestor): PidResolver {
  return {
    podOf(pid) {
      const a = attestor.attest(pid, attestor.nowTicks());
      return a.ok ? { ok: true, podUid: a.process.pod.podUid } : { ok: false, reason: a.reason, detail: a.detail };
    },
  };
}

export interface WorkloadResolverOptions {
  readonly pods: NodePods;
  /** Resolves PID references; without it they are NOT_FOUND. */
  readonly pids?: PidResolver;
  /** SPIFFE IDs allowed to use each reference kind. */
  readonly callers: Readonly<Record<ReferenceKind, readonly string[]>>;
}

/** Why an existing pod of this node gets nothing (Broker API: PERMISSION_DENIED, WORKLOAD_NOT_ENTITLED). */
export function notEntitled(what: string, why: string): BrokerError {
  return new BrokerError('ERR_WORKLOAD_NOT_ENTITLED', `${what} gets no identity (${why})`, {
    status: 'permission-denied',
    publicMessage: `workload is not entitled to an identity (${why})`,
  });
}

function notFound(what: string): BrokerError {
  return new BrokerError('ERR_WORKLOAD_NOT_FOUND', `no ${what} on this node`, { status: 'not-found', publicMessage: 'workload not found on this node' });
}

export class WorkloadResolver {
  readonly #o: WorkloadResolverOptions;
  readonly #callers: Readonly<Record<ReferenceKind, ReadonlySet<string>>>;

  constructor(options: WorkloadResolverOptions) {
    this.#o = options;
    this.#callers = { kubernetes: new Set(options.callers.kubernetes), pid: new Set(options.callers.pid) };
  }

  /** The pod `request` names for `caller`, and the reference as decoded. */
  resolve(request: WorkloadRequest, caller: string): { readonly pod: TrackedPod; readonly ref: WorkloadRef } {
    const ref = parseReference(request.reference?.reference);
    if (!this.#callers[ref.kind].has(caller)) {
      throw new BrokerError('ERR_REFERENCE_TYPE_NOT_ALLOWED', `caller ${caller} may not use ${ref.kind} references (${ref.typeUrl})`, {
        status: 'permission-denied',
        publicMessage: `caller may not use ${ref.kind} workload references`,
      });
    }
    const pod = ref.kind === 'pid' ? this.#byPid(ref.pid) : this.#byPodReference(ref);
    return { pod, ref };
  }

  #byPid(pid: number): TrackedPod {
    const found = this.#o.pids?.podOf(pid);
    if (!found) throw notFound(`process ${pid} (PID references are not resolved by this broker)`);
    if (!found.ok) throw notFound(`workload process ${pid}: ${found.reason}: ${found.detail}`);
    return this.#byPodReference({ uid: found.podUid, namespace: undefined, name: undefined }, `process ${pid} in pod uid=${found.podUid}`);
  }

  #byPodReference(ref: PodReference, what = `pod ${describePodReference(ref)}`): TrackedPod {
    const { pods } = this.#o;
    const byUid = ref.uid !== undefined ? pods.byUid(ref.uid) : undefined;
    const byKey = ref.name !== undefined ? pods.byKey(ref.namespace!, ref.name) : undefined;
    const pod = ref.uid !== undefined ? byUid : byKey;
    if (!pod) {
      // A pod of this node that gets no identity exists: not entitled, rather than not found.
      const idle: IneligiblePod | undefined = ref.uid !== undefined ? pods.ineligibleByUid(ref.uid) : pods.ineligibleByKey(ref.namespace!, ref.name!);
      const keyMatches = ref.uid === undefined || ref.name === undefined || (idle?.namespace === ref.namespace && idle?.name === ref.name);
      if (idle && keyMatches) throw notEntitled(`pod ${idle.namespace}/${idle.name}`, idle.eligibility);
      throw notFound(what);
    }
    if (ref.uid !== undefined && ref.name !== undefined && (byKey === undefined || byKey.uid !== ref.uid)) throw notFound(what);
    return pod;
  }
}
