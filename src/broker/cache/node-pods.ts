/**
 * The pods running on this node and the identity each one needs. Fed by the node pod watch and
 * by CNI registrations; drives the certificate manager (retain on a new eligible pod, release
 * when it leaves) and tells Broker API streams when their pod is gone.
 *
 * Plain TypeScript over plain data: the Kubernetes adapter turns API objects into `PodFacts`.
 */
import { kubernetesIdentity } from '../../spiffe/kubernetes.js';

/** What the broker needs to know about a pod. */
export interface PodFacts {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  /** `spec.serviceAccountName`, '' when the pod has none (mirror pods). */
  readonly serviceAccount: string;
  readonly nodeName: string;
  readonly hostNetwork: boolean;
  /** metadata.deletionTimestamp is set. */
  readonly deleting: boolean;
  /** status.phase, when known. */
  readonly phase: string | undefined;
}

export interface TrackedPod extends PodFacts {
  readonly identity: string;
  /** When the broker first saw the pod (ms since epoch). */
  readonly seenAt: number;
}

/** Why a pod stopped being served. */
export type PodGoneReason = 'deleted' | 'terminating' | 'finished' | 'replaced' | 'changed';

export type PodGoneListener = (reason: PodGoneReason) => void;

/** The part of the certificate manager this registry drives. */
export interface IdentityRetainer {
  retain(identity: string, holder: string, priority?: 'realtime' | 'warmup' | 'background'): void;
  release(identity: string, holder: string): void;
}

/**
 * `no-service-account`: `spec.serviceAccountName` is empty. The API server fills it in for every
 * ordinary pod; it stays empty on mirror pods of static pods, which anyone who can write the
 * node's manifest directory can create in any namespace. Such a pod has no identity — mapping it
 * to `default` would let the node claim `ns/<any>/sa/default`.
 */
export type PodEligibility = 'eligible' | 'other-node' | 'host-network' | 'terminating' | 'finished' | 'self' | 'no-service-account';

/** A pod on this node that gets no identity, and why. */
export interface IneligiblePod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  /** `spec.serviceAccountName` ('' when none): who the pod runs as, though it gets no identity. */
  readonly serviceAccount: string;
  readonly eligibility: Exclude<PodEligibility, 'eligible' | 'other-node'>;
}

export interface NodePodsOptions {
  readonly nodeName: string;
  readonly trustDomain: string;
  readonly certs: IdentityRetainer;
  readonly now: () => number;
  /** The broker's own pod: it has its own SVID and gets no impersonated one. */
  readonly ownPodUid?: string;
}

export class NodePods {
  readonly #opts: NodePodsOptions;
  readonly #byUid = new Map<string, TrackedPod>();
  readonly #byKey = new Map<string, string>();
  readonly #goneListeners = new Map<string, Set<PodGoneListener>>();
  /** Pods on this node that get no identity (host network, terminating, ...), so a lookup can say why. */
  readonly #ineligible = new Map<string, IneligiblePod>();
  readonly #ineligibleByKey = new Map<string, string>();

  constructor(options: NodePodsOptions) {
    this.#opts = options;
  }

  get size(): number {
    return this.#byUid.size;
  }

  eligibility(pod: PodFacts): PodEligibility {
    if (pod.nodeName !== this.#opts.nodeName) return 'other-node';
    if (pod.uid === this.#opts.ownPodUid) return 'self';
    if (pod.hostNetwork) return 'host-network';
    if (pod.serviceAccount === '') return 'no-service-account';
    if (pod.deleting) return 'terminating';
    if (pod.phase === 'Succeeded' || pod.phase === 'Failed') return 'finished';
    return 'eligible';
  }

  identityOf(pod: Pick<PodFacts, 'namespace' | 'serviceAccount'>): string {
    return kubernetesIdentity(this.#opts.trustDomain, pod.namespace, pod.serviceAccount);
  }

  /**
   * Adds or updates a pod (idempotent). An eligible pod retains its identity (fetch starts at
   * warmup); a pod that became ineligible, or whose service account changed, is dropped and its
   * streams end. Returns the eligibility.
   */
  upsert(pod: PodFacts): PodEligibility {
    const eligibility = this.eligibility(pod);
    const existing = this.#byUid.get(pod.uid);
    this.#forgetIneligible(pod.uid);
    if (eligibility !== 'eligible') {
      if (eligibility !== 'other-node') this.#rememberIneligible({ uid: pod.uid, namespace: pod.namespace, name: pod.name, serviceAccount: pod.serviceAccount, eligibility });
      if (existing) this.#drop(existing, eligibility === 'finished' ? 'finished' : eligibility === 'terminating' ? 'terminating' : 'changed');
      return eligibility;
    }
    const identity = this.identityOf(pod);
    if (existing && existing.identity === identity) {
      this.#byUid.set(pod.uid, { ...pod, identity, seenAt: existing.seenAt });
      return eligibility;
    }
    if (existing) this.#drop(existing, 'changed');
    // Same namespace/name with another UID: the old pod was replaced.
    const key = keyOf(pod.namespace, pod.name);
    const previousUid = this.#byKey.get(key);
    if (previousUid !== undefined && previousUid !== pod.uid) {
      const previous = this.#byUid.get(previousUid);
      if (previous) this.#drop(previous, 'replaced');
    }
    this.#byUid.set(pod.uid, { ...pod, identity, seenAt: this.#opts.now() });
    this.#byKey.set(key, pod.uid);
    this.#opts.certs.retain(identity, pod.uid, 'warmup');
    return eligibility;
  }

  /** The pod with this UID left the cluster. */
  remove(uid: string): void {
    this.#forgetIneligible(uid);
    const pod = this.#byUid.get(uid);
    if (pod) this.#drop(pod, 'deleted');
  }

  /** A full re-list: pods not in `pods` are gone, the rest are upserted. */
  replaceAll(pods: readonly PodFacts[]): void {
    const present = new Set(pods.map((p) => p.uid));
    for (const uid of [...this.#byUid.keys(), ...this.#ineligible.keys()]) if (!present.has(uid)) this.remove(uid);
    for (const p of pods) this.upsert(p);
  }

  byUid(uid: string): TrackedPod | undefined {
    return this.#byUid.get(uid);
  }

  byKey(namespace: string, name: string): TrackedPod | undefined {
    const uid = this.#byKey.get(keyOf(namespace, name));
    return uid === undefined ? undefined : this.#byUid.get(uid);
  }

  /** A pod of this node that exists but gets no identity, by UID (Broker API: WORKLOAD_NOT_ENTITLED). */
  ineligibleByUid(uid: string): IneligiblePod | undefined {
    return this.#ineligible.get(uid);
  }

  /** The same, by namespace/name. */
  ineligibleByKey(namespace: string, name: string): IneligiblePod | undefined {
    const uid = this.#ineligibleByKey.get(keyOf(namespace, name));
    return uid === undefined ? undefined : this.#ineligible.get(uid);
  }

  pods(): TrackedPod[] {
    return [...this.#byUid.values()];
  }

  /** Pods holding `identity`. */
  podsOf(identity: string): TrackedPod[] {
    return this.pods().filter((p) => p.identity === identity);
  }

  /** Calls `listener` once when the pod with `uid` stops being served. Returns an unsubscribe. */
  onGone(uid: string, listener: PodGoneListener): () => void {
    if (!this.#byUid.has(uid)) {
      listener('deleted');
      return () => undefined;
    }
    let set = this.#goneListeners.get(uid);
    if (!set) this.#goneListeners.set(uid, (set = new Set()));
    set.add(listener);
    return () => {
      set.delete(listener);
      if (set.size === 0 && this.#goneListeners.get(uid) === set) this.#goneListeners.delete(uid);
    };
  }

  #rememberIneligible(pod: IneligiblePod): void {
    const key = keyOf(pod.namespace, pod.name);
    const previous = this.#ineligibleByKey.get(key);
    if (previous !== undefined && previous !== pod.uid) this.#ineligible.delete(previous);
    this.#ineligible.set(pod.uid, pod);
    this.#ineligibleByKey.set(key, pod.uid);
  }

  #forgetIneligible(uid: string): void {
    const pod = this.#ineligible.get(uid);
    if (!pod) return;
    this.#ineligible.delete(uid);
    const key = keyOf(pod.namespace, pod.name);
    if (this.#ineligibleByKey.get(key) === uid) this.#ineligibleByKey.delete(key);
  }

  #drop(pod: TrackedPod, reason: PodGoneReason): void {
    this.#byUid.delete(pod.uid);
    const key = keyOf(pod.namespace, pod.name);
    if (this.#byKey.get(key) === pod.uid) this.#byKey.delete(key);
    this.#opts.certs.release(pod.identity, pod.uid);
    const listeners = this.#goneListeners.get(pod.uid);
    this.#goneListeners.delete(pod.uid);
    for (const l of listeners ?? []) l(reason);
  }
}

function keyOf(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}
