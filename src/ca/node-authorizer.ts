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
 * Pure: plain data in, the requested identity out, or a coded CaError (status unauthenticated).
 */
import { parseKubernetesIdentity, type KubernetesIdentity } from '../spiffe/index.js';
import type { Caller } from './caller.js';
import { authzError } from './errors.js';
import type { PodIndex, PodInfo } from './pod-index.js';

const PARSED_IDENTITY_CACHE = 4096;

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
  readonly #trusted: ReadonlySet<string>;
  readonly #authorities: ReadonlySet<string>;
  readonly #trustDomains: ReadonlySet<string>;
  readonly #pods: PodIndex;
  /** Parsed requested identities (not secret, few distinct per node agent); bounded. */
  readonly #parsed = new Map<string, KubernetesIdentity>();

  constructor(options: NodeAuthorizerOptions) {
    this.#trusted = new Set(options.trustedNodeAccounts);
    this.#authorities = new Set(options.trustedRegistrationAuthorities ?? []);
    this.#trustDomains = new Set(options.trustDomains);
    this.#pods = options.pods;
  }

  /** Returns the impersonated identity when `caller` may have it; throws a CaError otherwise. */
  authorize(caller: Caller, requestedIdentity: string): KubernetesIdentity {
    const callerAccount = this.#trustedAccount(caller);
    const requested = this.#requested(requestedIdentity);
    const callerPod = this.#callerPod(caller, callerAccount);
    if (this.#authorities.has(callerAccount)) return requested;
    const nodeName = callerPod.nodeName;
    const onNode = nodeName !== '' && this.#pods.hasActivePodOnNode({ namespace: requested.namespace, serviceAccountName: requested.serviceAccount, nodeName });
    if (!onNode) {
      throw authzError(
        'ERR_CA_NO_POD_ON_NODE',
        `no running pod of ${requested.namespace}/${requested.serviceAccount} on node ${nodeName || '(unscheduled)'}`,
      );
    }
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

  #requested(requestedIdentity: string): KubernetesIdentity {
    let requested = this.#parsed.get(requestedIdentity);
    if (requested === undefined) {
      try {
        requested = parseKubernetesIdentity(requestedIdentity);
      } catch (err) {
        const code = (err as { code?: string }).code ?? 'invalid';
        throw authzError('ERR_CA_IDENTITY_INVALID', `requested identity is not spiffe://<td>/ns/<ns>/sa/<sa> (${code})`);
      }
      if (this.#parsed.size >= PARSED_IDENTITY_CACHE) this.#parsed.clear();
      this.#parsed.set(requestedIdentity, requested);
    }
    if (!this.#trustDomains.has(requested.trustDomain)) {
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
