/**
 * The part of kube-apiserver's Node authorizer the devcluster needs: a kubelet
 * (`system:node:<name>` in `system:nodes`) may read pods, nodes and service accounts, write
 * events, and create and follow PodCertificateRequests. Simpler than the real graph-based
 * authorizer (which limits reads to objects related to the node's pods); what a node may ask
 * for in a PodCertificateRequest is limited by NodeRestriction (pcr-admission.ts).
 */
import type { UserInfo } from './authn.js';
import type { Attributes, PolicyRule } from './rbac.js';
import { ruleAllows } from './rbac.js';

const NODE_PREFIX = 'system:node:';

const NODE_RULES: readonly PolicyRule[] = [
  { verbs: ['get', 'list', 'watch'], apiGroups: [''], resources: ['pods', 'nodes'] },
  { verbs: ['get'], apiGroups: [''], resources: ['serviceaccounts'] },
  { verbs: ['create', 'patch', 'update'], apiGroups: ['', 'events.k8s.io'], resources: ['events'] },
  { verbs: ['create', 'get', 'list', 'watch'], apiGroups: ['certificates.k8s.io'], resources: ['podcertificaterequests'] },
];

/** nodeidentifier.NewDefaultNodeIdentifier: the node a user is, if it is one. */
export function nodeNameOf(user: UserInfo | undefined): string | undefined {
  if (!user || !user.username.startsWith(NODE_PREFIX) || !user.groups.includes('system:nodes')) return undefined;
  return user.username.slice(NODE_PREFIX.length);
}

/** The user a node's kubelet is (`system:node:<name>` in `system:nodes`), as `nodeNameOf` recognizes it. */
export function nodeUser(node: string): UserInfo {
  return { username: `${NODE_PREFIX}${node}`, groups: ['system:nodes', 'system:authenticated'] };
}

/** True when the request comes from a node and the Node authorizer allows it. */
export function nodeAuthorizerAllows(a: Attributes): boolean {
  if (nodeNameOf(a.user) === undefined) return false;
  return NODE_RULES.some((r) => ruleAllows(r, a));
}
