/**
 * Who may ask the Istio CA front for what, decided on the node from the broker's own pod set
 * (the CA's node authorizer, but local: a denial costs no CA call).
 *
 * 1. The caller's `namespace/serviceaccount` (from its reviewed token) is on the allow-list
 *    (`ISTIO_CA_FRONT_ALLOWED_ACCOUNTS`, default `istio-system/ztunnel`).
 * 2. The broker's pod watch has listed this node's pods.
 * 3. The token is bound to a pod (TokenReview `user.extra` pod-name and pod-uid), and that pod is
 *    on THIS node with the token's UID, namespace, name and service account, and has not
 *    finished (host-network and terminating pods still count: ztunnel may run either way).
 * 4. With `ImpersonatedIdentity`: it is `spiffe://<td>/ns/<ns>/sa/<sa>` of the broker's trust
 *    domain and a pod of this node that gets an identity holds it (the broker's own entry for
 *    that identity). Without: the caller's own identity.
 *
 * Every failure is an `unauthenticated` BrokerError with a precise code (log and metric); the
 * caller sees istiod's generic answer. Pure over a `NodePods`-shaped view.
 */
import { kubernetesIdentity, parseKubernetesIdentity } from '../../../spiffe/kubernetes.js';
import type { IneligiblePod, TrackedPod } from '../../cache/node-pods.js';
import { BrokerError, type BrokerErrorCode } from '../../errors.js';

/** The authenticated caller as the CA's authenticators report it (src/ca `Caller`). */
export interface FrontCaller {
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly podName?: string;
  readonly podUid?: string;
}

/** What the authorizer reads of the node's pods (`NodePods` satisfies it). */
export interface NodePodView {
  byUid(uid: string): TrackedPod | undefined;
  ineligibleByUid(uid: string): IneligiblePod | undefined;
  podsOf(identity: string): readonly TrackedPod[];
}

export interface FrontAuthorizerOptions {
  readonly trustDomain: string;
  /** `namespace/serviceaccount` entries allowed to call the front. */
  readonly allowedAccounts: readonly string[];
  readonly pods: NodePodView;
  /** True once the node's pods are listed (the pod watch is synced). */
  readonly podsSynced: () => boolean;
}

/** The decision: the identity to ask the CA for, and the caller pod (the per-caller limits key). */
export interface FrontGrant {
  readonly identity: string;
  readonly callerPodUid: string;
  readonly callerAccount: string;
}

/** Caller pods that are on the node and may ask although they get no identity of their own. */
const CALLER_INELIGIBILITY_OK: ReadonlySet<IneligiblePod['eligibility']> = new Set(['host-network', 'terminating']);

/** Canonical spellings remembered at most (see `FrontAuthorizer.#canonical`). */
const MAX_CANONICAL = 256;

function denied(code: BrokerErrorCode, message: string): BrokerError {
  return new BrokerError(code, message, { status: 'unauthenticated' });
}

export class FrontAuthorizer {
  readonly #o: FrontAuthorizerOptions;
  readonly #allowed: ReadonlySet<string>;
  /**
   * The canonical identity of each well-formed `ImpersonatedIdentity` and caller account seen
   * (parsing and checking the names costs ~15 µs a call; a node asks for a few identities). Only
   * the spelling is cached: whether a pod holds it is read from the pods every call.
   */
  readonly #canonical = new Map<string, string>();

  constructor(options: FrontAuthorizerOptions) {
    this.#o = options;
    this.#allowed = new Set(options.allowedAccounts);
  }

  authorize(caller: FrontCaller, impersonated: string | undefined): FrontGrant {
    const callerAccount = `${caller.namespace}/${caller.serviceAccount}`;
    if (!this.#allowed.has(callerAccount)) throw denied('ERR_FRONT_CALLER_NOT_ALLOWED', `caller ${callerAccount} may not use the Istio CA front`);
    if (!this.#o.podsSynced()) throw denied('ERR_FRONT_PODS_NOT_SYNCED', "this node's pods are not listed yet");
    const podUid = caller.podUid ?? '';
    const podName = caller.podName ?? '';
    if (podUid === '' || podName === '') throw denied('ERR_FRONT_CALLER_NOT_POD_BOUND', `caller ${callerAccount} token is not bound to a pod`);
    this.#requireCallerPod(caller, { uid: podUid, name: podName, account: callerAccount });
    const identity = impersonated === undefined || impersonated === '' ? this.#own(caller, callerAccount) : this.#impersonable(impersonated);
    return { identity, callerPodUid: podUid, callerAccount };
  }

  #requireCallerPod(caller: FrontCaller, pod: { readonly uid: string; readonly name: string; readonly account: string }): void {
    const tracked = this.#o.pods.byUid(pod.uid);
    const ineligible = tracked ? undefined : this.#o.pods.ineligibleByUid(pod.uid);
    const found = tracked ?? (ineligible && CALLER_INELIGIBILITY_OK.has(ineligible.eligibility) ? ineligible : undefined);
    if (!found) {
      const why = ineligible ? ` (it is ${ineligible.eligibility})` : '';
      throw denied('ERR_FRONT_CALLER_NOT_ON_NODE', `caller pod ${caller.namespace}/${pod.name} uid ${pod.uid} is not a running pod of this node${why}`);
    }
    if (found.namespace !== caller.namespace || found.name !== pod.name || found.serviceAccount !== caller.serviceAccount) {
      throw denied(
        'ERR_FRONT_CALLER_NOT_ON_NODE',
        `pod uid ${pod.uid} on this node is ${found.namespace}/${found.name} running as ${found.serviceAccount || '(none)'}, the token says ${caller.namespace}/${pod.name} as ${caller.serviceAccount}`,
      );
    }
  }

  #own(caller: FrontCaller, account: string): string {
    return this.#remember(`account ${account}`, () => kubernetesIdentity(this.#o.trustDomain, caller.namespace, caller.serviceAccount));
  }

  /** `make()` once per key (bounded: the map is emptied when full); a throw is not remembered. */
  #remember(key: string, make: () => string): string {
    const hit = this.#canonical.get(key);
    if (hit !== undefined) return hit;
    const value = make();
    if (this.#canonical.size >= MAX_CANONICAL) this.#canonical.clear();
    this.#canonical.set(key, value);
    return value;
  }

  #impersonable(requested: string): string {
    const identity = this.#remember(`id ${requested}`, () => this.#canonicalOf(requested));
    if (this.#o.pods.podsOf(identity).length === 0) {
      const { namespace, serviceAccount } = parseKubernetesIdentity(identity);
      throw denied('ERR_FRONT_NO_POD_ON_NODE', `no pod of ${namespace}/${serviceAccount} that gets an identity runs on this node`);
    }
    return identity;
  }

  #canonicalOf(requested: string): string {
    let parsed;
    try {
      parsed = parseKubernetesIdentity(requested);
    } catch {
      throw denied('ERR_FRONT_IDENTITY_INVALID', 'requested identity is not spiffe://<td>/ns/<ns>/sa/<sa>');
    }
    if (parsed.trustDomain !== this.#o.trustDomain) throw denied('ERR_FRONT_IDENTITY_INVALID', `requested trust domain ${parsed.trustDomain} is not the broker's`);
    // The canonical spelling, which is what NodePods keys identities by.
    return kubernetesIdentity(parsed.trustDomain, parsed.namespace, parsed.serviceAccount);
  }
}
