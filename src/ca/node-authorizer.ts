/**
 * The CA's impersonation check, as istiod's node authorizer does it. A trusted node agent
 * (e.g. `istio-system/ztunnel`) may ask for the identity of a workload only when such a
 * workload runs on the agent's own node:
 *
 * 1. the caller's service account is in the trusted node-agent list;
 * 2. the requested identity is `spiffe://<td>/ns/<ns>/sa/<sa>` in our trust domain;
 * 3. the caller's token is bound to a pod, that pod exists with the same UID and runs as the
 *    caller's service account;
 * 4. at least one non-failed pod of the requested service account is scheduled on the caller
 *    pod's node.
 *
 * A registration authority (another certbroker CA in `istio-upstream` mode, which authorized its
 * own callers against their nodes first) is trusted for the whole trust domain instead: a caller
 * whose account is in `trustedRegistrationAuthorities` passes with checks 2 and 3 alone (its
 * token is bound to its own, existing pod), without check 4 — it serves workloads of every node.
 *
 * Plain data in, the requested identity out, or a coded CaError (status unauthenticated). Over
 * an index that offers slots (PodSlots: the compact index behind the informer) the per-call cost
 * does not grow with the cluster: the caller pod found for a token is noted on the Caller object
 * itself (an AuthenticatedCaller, caller.ts: the token cache hands out the same object for every
 * call with that token) as its slot, the slot's stamp and the pod's node id, and on the next call
 * the note stands only while the slot's stamp is unchanged (any upsert or remove of that pod
 * changes it, so a deleted, replaced or updated pod is checked afresh on the very next call);
 * each requested identity keeps its account id. A warm call is then one probe of the caller
 * node's own account table, at the place the note keeps for it, with no string-keyed lookup of
 * the pod or the node and no read of the per-node directory that says where tables are. The note is the
 * only state written, and it is never a decision: steps 2, 3 (synced) and 4 run on every call.
 *
 * On a large cluster the warm path's cost is its cache misses, so it reads as few places as it
 * can: the note lives in the Caller object (read anyway by the token cache) rather than an object
 * of its own; a noted slot is watched, so that its stamp is read only after some noted pod (the
 * node agents') was written or its node's table moved (the index-wide `watchEpoch`), so the
 * table's place is kept in the note as well; and a parsed identity is one object
 * that carries its account id and whether its trust domain is served, and is what is returned.
 */
import { errCode } from '../core/errors.js';
import { parseKubernetesIdentity, type KubernetesIdentity } from '../spiffe/index.js';
import { AuthenticatedCaller, type Caller } from './caller.js';
import { authzError } from './errors.js';
import type { PodIndex, PodInfo, PodSlots } from './pod-index.js';
import { RecentMap } from './recent-map.js';

/**
 * Parsed requested identities kept at least (per generation of the RecentMap); over an index with
 * slots the limit grows to the index's accounts x trust domains, the distinct identities that can
 * be granted, so a large cluster's identities all stay parsed (a 4096 cap cleared when full made
 * every call of a cluster with more identities a full SPIFFE parse).
 */
const PARSED_IDENTITY_MIN = 4096;

/**
 * A parsed requested identity (it is what `authorize` returns: one object, so a warm call reads
 * one object for the identity) and, once an index knew it, its account id there.
 */
interface Requested extends KubernetesIdentity {
  /** Its trust domain is one this authorizer serves (fixed per authorizer, so decided once). */
  readonly served: boolean;
  /** PodSlots `instance` the account id is of (0: none yet). */
  index: number;
  account: number;
}

/** Authorizers made in this process so far (each one's `id`, which its notes carry). */
let authorizers = 0;

export interface NodeAuthorizerOptions {
  /** `namespace/serviceaccount` entries; empty = nobody may impersonate. */
  readonly trustedNodeAccounts: readonly string[];
  /** `namespace/serviceaccount` entries of registration authorities, trusted for any identity of the trust domain (default none). */
  readonly trustedRegistrationAuthorities?: readonly string[];
  /** Trust domains accepted in the requested identity (the first is ours; the rest aliases). */
  readonly trustDomains: readonly string[];
  readonly pods: PodIndex;
}

export class NodeAuthorizer {
  readonly id = ++authorizers;
  readonly #trusted: ReadonlySet<string>;
  readonly #authorities: ReadonlySet<string>;
  readonly #trustDomains: ReadonlySet<string>;
  readonly #pods: PodIndex;
  /** Parsed requested identities (not secret); bounded, least recently used go first (recent-map.ts). */
  readonly #parsed = new RecentMap<Requested>(PARSED_IDENTITY_MIN);
  #parses = 0;

  constructor(options: NodeAuthorizerOptions) {
    this.#trusted = new Set(options.trustedNodeAccounts);
    this.#authorities = new Set(options.trustedRegistrationAuthorities ?? []);
    this.#trustDomains = new Set(options.trustDomains);
    this.#pods = options.pods;
  }

  /** The parsed-identity cache: entries held (upper bound), its limit per generation, and full parses so far (a miss each). */
  get identityCache(): { readonly held: number; readonly limit: number; readonly parses: number } {
    return { held: this.#parsed.size, limit: this.#parsed.limit, parses: this.#parses };
  }

  /** Returns the impersonated identity when `caller` may have it; throws a CaError otherwise. */
  authorize(caller: Caller, requestedIdentity: string): KubernetesIdentity {
    const slots = this.#pods.slots;
    if (slots !== undefined) return this.#authorizeBySlot(caller, requestedIdentity, slots);
    const callerAccount = this.#trustedAccount(caller);
    const requested: KubernetesIdentity = this.#requested(requestedIdentity);
    const callerPod = this.#callerPod(caller, callerAccount);
    if (this.#authorities.has(callerAccount)) return requested;
    const nodeName = callerPod.nodeName;
    const onNode = nodeName !== '' && this.#pods.hasActivePodOnNode({ namespace: requested.namespace, serviceAccountName: requested.serviceAccount, nodeName });
    if (!onNode) this.#noPodOnNode(requested, nodeName);
    return requested;
  }

  /**
   * Steps 1 and 3 alone: `caller` is a trusted node agent (or registration authority) whose
   * token is bound to its own, existing pod. Returns that pod; throws the same CaErrors as `authorize`. For grants to the
   * node agent itself (serving names on its own SVID, serving-names.ts).
   */
  authorizeNodeAgent(caller: Caller): PodInfo {
    return this.#callerPod(caller, this.#trustedAccount(caller));
  }

  #trustedAccount(caller: Caller): string {
    const callerAccount = `${caller.namespace}/${caller.serviceAccount}`;
    if (!this.#trusted.has(callerAccount) && !this.#authorities.has(callerAccount)) {
      throw authzError('ERR_CA_NODE_NOT_TRUSTED', `caller ${callerAccount} is not a trusted node agent`);
    }
    return callerAccount;
  }

  /** `authorize` over slots: the same checks in the same order, with the caller pod's note. */
  #authorizeBySlot(caller: Caller, requestedIdentity: string, slots: PodSlots): KubernetesIdentity {
    // Only an AuthenticatedCaller carries a note, and only this authorizer's note counts here.
    const noted = caller instanceof AuthenticatedCaller ? caller : undefined;
    const mine = noted !== undefined && noted.noteAuthorizer === this.id;
    const authority = mine ? noted.noteAuthority : this.#authorities.has(this.#trustedAccount(caller));
    const requested = this.#requested(requestedIdentity);
    if (!this.#pods.synced) throw authzError('ERR_CA_POD_INDEX_NOT_SYNCED', 'pod index has not synced yet');
    const node = mine && this.#stands(noted, slots) ? noted.noteNode : this.#findCallerPod(caller, noted, authority, slots);
    if (authority) return requested;
    const account = this.#accountOf(requested, slots);
    // A noted caller (the note now stands, or was just written) probes its node's table where the note says it is.
    const onNode = account >= 0 && node >= 0 && (noted?.noteAuthorizer === this.id ? slots.activeIn(noted.noteTableBase, noted.noteTableEntries, account) : slots.activeOnNode(node, account));
    if (!onNode) this.#noPodOnNode(requested, node < 0 ? '' : slots.nodeName(node));
    return requested;
  }

  /** The requested identity's account id in `slots` (kept on it once found), or -1 while no pod has run as it. */
  #accountOf(requested: Requested, slots: PodSlots): number {
    if (requested.index === slots.instance) return requested.account;
    const account = slots.accountId(requested.namespace, requested.serviceAccount);
    // An account no pod has run as yet may get an id later: only a found one is kept.
    if (account >= 0) {
      requested.index = slots.instance;
      requested.account = account;
    }
    return account;
  }

  /**
   * Whether the noted slot still holds exactly the pod that was checked: no watched slot was
   * written since the note last stood (the index's `watchEpoch`: no stamp read at all), or else
   * the slot's own stamp is unchanged (then the note stands from this epoch on).
   */
  #stands(noted: AuthenticatedCaller, slots: PodSlots): boolean {
    if (noted.noteIndex !== slots.instance) return false;
    const epoch = slots.watchEpoch;
    if (noted.noteEpoch === epoch) return true;
    if (slots.stamp(noted.noteSlot) !== noted.noteStamp) return false;
    // The slot is as checked; its node's table may have moved (or been placed): watch again, then look where it is.
    slots.watch(noted.noteSlot);
    this.#noteTable(noted, slots);
    noted.noteEpoch = slots.watchEpoch;
    return true;
  }

  /** Step 4 by slot: finds the caller's pod and checks it against the token; notes it on `noted` (the caller, when it can carry a note). Returns the pod's node id (-1: unscheduled). */
  #findCallerPod(caller: Caller, noted: AuthenticatedCaller | undefined, authority: boolean, slots: PodSlots): number {
    const callerAccount = `${caller.namespace}/${caller.serviceAccount}`;
    if (caller.podName === undefined || caller.podUid === undefined || caller.podName === '' || caller.podUid === '') {
      throw authzError('ERR_CA_CALLER_NOT_POD_BOUND', `caller ${callerAccount} token is not bound to a pod`);
    }
    const slot = slots.slotOf(caller.namespace, caller.podName);
    if (slot < 0) throw authzError('ERR_CA_CALLER_POD_MISSING', `caller pod ${caller.namespace}/${caller.podName} not found`);
    if (!slots.uidIs(slot, caller.podUid)) {
      throw authzError('ERR_CA_CALLER_POD_UID_MISMATCH', `caller pod ${caller.namespace}/${caller.podName} has a different UID than the token`);
    }
    if (!slots.serviceAccountIs(slot, caller.serviceAccount)) {
      const runsAs = this.#pods.getPod({ namespace: caller.namespace, name: caller.podName })?.serviceAccountName ?? '?';
      throw authzError('ERR_CA_CALLER_POD_SA_MISMATCH', `caller pod ${caller.namespace}/${caller.podName} runs as ${runsAs}, token says ${caller.serviceAccount}`);
    }
    const node = slots.nodeOf(slot);
    if (noted !== undefined) {
      // Watched before the epoch is read: any later write of the slot moves the epoch past the note's.
      slots.watch(slot);
      noted.noteAuthorizer = this.id;
      noted.noteAuthority = authority;
      noted.noteIndex = slots.instance;
      noted.noteSlot = slot;
      noted.noteStamp = slots.stamp(slot);
      noted.noteNode = node;
      this.#noteTable(noted, slots);
      noted.noteEpoch = slots.watchEpoch;
    }
    return node;
  }

  /** Notes where the noted node's table is now (after `watch`, so any later move shows in the epoch). */
  #noteTable(noted: AuthenticatedCaller, slots: PodSlots): void {
    noted.noteTableBase = slots.tableBase(noted.noteNode);
    noted.noteTableEntries = slots.tableEntries(noted.noteNode);
  }

  #noPodOnNode(requested: KubernetesIdentity, nodeName: string): never {
    throw authzError('ERR_CA_NO_POD_ON_NODE', `no running pod of ${requested.namespace}/${requested.serviceAccount} on node ${nodeName || '(unscheduled)'}`);
  }

  #requested(requestedIdentity: string): Requested {
    let requested = this.#parsed.get(requestedIdentity);
    if (requested === undefined) {
      let identity: KubernetesIdentity;
      this.#parses++;
      try {
        identity = parseKubernetesIdentity(requestedIdentity);
      } catch (err) {
        const code = errCode(err) ?? 'invalid';
        throw authzError('ERR_CA_IDENTITY_INVALID', `requested identity is not spiffe://<td>/ns/<ns>/sa/<sa> (${code})`);
      }
      const slots = this.#pods.slots;
      if (slots !== undefined) this.#parsed.setLimit(Math.max(PARSED_IDENTITY_MIN, slots.accounts * this.#trustDomains.size));
      const { trustDomain, namespace, serviceAccount, id } = identity;
      requested = { trustDomain, namespace, serviceAccount, id, served: this.#trustDomains.has(trustDomain), index: 0, account: -1 };
      this.#parsed.set(requestedIdentity, requested);
    }
    if (!requested.served) {
      throw authzError('ERR_CA_IDENTITY_INVALID', `requested trust domain ${requested.trustDomain} is not served by this CA`);
    }
    return requested;
  }

  #callerPod(caller: Caller, callerAccount: string): PodInfo {
    if (!this.#pods.synced) throw authzError('ERR_CA_POD_INDEX_NOT_SYNCED', 'pod index has not synced yet');
    if (caller.podName === undefined || caller.podUid === undefined || caller.podName === '' || caller.podUid === '') {
      throw authzError('ERR_CA_CALLER_NOT_POD_BOUND', `caller ${callerAccount} token is not bound to a pod`);
    }
    const callerPod = this.#pods.getPod({ namespace: caller.namespace, name: caller.podName });
    if (!callerPod) {
      throw authzError('ERR_CA_CALLER_POD_MISSING', `caller pod ${caller.namespace}/${caller.podName} not found`);
    }
    if (callerPod.uid !== caller.podUid) {
      throw authzError('ERR_CA_CALLER_POD_UID_MISMATCH', `caller pod ${caller.namespace}/${caller.podName} has a different UID than the token`);
    }
    if (callerPod.serviceAccountName !== caller.serviceAccount) {
      throw authzError(
        'ERR_CA_CALLER_POD_SA_MISMATCH',
        `caller pod ${caller.namespace}/${caller.podName} runs as ${callerPod.serviceAccountName}, token says ${caller.serviceAccount}`,
      );
    }
    return callerPod;
  }
}
