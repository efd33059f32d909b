/**
 * RBAC as the real authorizer evaluates it: ClusterRoleBindings, then RoleBindings in the
 * request's namespace; a rule matches on verb, API group, resource (with `resource/subresource`
 * and `*` forms), resourceNames, or nonResourceURLs. `system:masters` is the superuser group.
 * Also renders the Forbidden message and the rules list SelfSubjectRulesReview returns.
 */
import type { ObjectStore, KubeObject } from './store.js';
import { findResource } from './resources.js';
import type { UserInfo } from './authn.js';
import { nodeAuthorizerAllows } from './node-authorizer.js';

export interface Attributes {
  readonly user: UserInfo;
  readonly verb: string;
  readonly resourceRequest: boolean;
  readonly namespace?: string;
  readonly apiGroup?: string;
  readonly resource?: string;
  readonly subresource?: string;
  readonly name?: string;
  readonly path?: string;
}

export interface Decision {
  readonly allowed: boolean;
  readonly reason: string;
}

export interface PolicyRule {
  readonly verbs: readonly string[];
  readonly apiGroups?: readonly string[];
  readonly resources?: readonly string[];
  readonly resourceNames?: readonly string[];
  readonly nonResourceURLs?: readonly string[];
}

interface Subject {
  readonly kind: string;
  readonly name: string;
  readonly namespace?: string;
}

export const CLUSTER_ROLE = findResource('rbac.authorization.k8s.io', 'v1', 'clusterroles')!;
export const ROLE = findResource('rbac.authorization.k8s.io', 'v1', 'roles')!;
const CRB = findResource('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings')!;
const RB = findResource('rbac.authorization.k8s.io', 'v1', 'rolebindings')!;

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

export function rulesOf(role: KubeObject | undefined): PolicyRule[] {
  const raw = role?.rules;
  if (!Array.isArray(raw)) return [];
  return raw.map((r: Record<string, unknown>) => ({
    verbs: strings(r.verbs),
    apiGroups: strings(r.apiGroups),
    resources: strings(r.resources),
    resourceNames: strings(r.resourceNames),
    nonResourceURLs: strings(r.nonResourceURLs),
  }));
}

function subjectMatches(s: Subject, user: UserInfo, bindingNamespace: string | undefined): boolean {
  switch (s.kind) {
    case 'User':
      return s.name === user.username;
    case 'Group':
      return user.groups.includes(s.name);
    case 'ServiceAccount': {
      const ns = s.namespace || bindingNamespace;
      return ns !== undefined && user.username === `system:serviceaccount:${ns}:${s.name}`;
    }
    default:
      return false;
  }
}

function describeSubject(s: Subject, bindingNamespace: string | undefined): string {
  if (s.kind === 'ServiceAccount') return `ServiceAccount "${s.name}/${s.namespace || bindingNamespace}"`;
  return `${s.kind} "${s.name}"`;
}

export function ruleAllows(rule: PolicyRule, a: Attributes): boolean {
  if (!rule.verbs.includes('*') && !rule.verbs.includes(a.verb)) return false;
  if (!a.resourceRequest) {
    const path = a.path ?? '';
    return (rule.nonResourceURLs ?? []).some((u) => u === '*' || u === path || (u.endsWith('*') && path.startsWith(u.slice(0, -1))));
  }
  const groups = rule.apiGroups ?? [];
  if (!groups.includes('*') && !groups.includes(a.apiGroup ?? '')) return false;
  const resource = a.resource ?? '';
  const combined = a.subresource ? `${resource}/${a.subresource}` : resource;
  const resources = rule.resources ?? [];
  const resOk = resources.some(
    (r) => r === '*' || r === combined || (a.subresource ? r === `*/${a.subresource}` || r === `${resource}/*` : false),
  );
  if (!resOk) return false;
  const names = rule.resourceNames ?? [];
  if (names.length === 0) return true;
  return a.name !== undefined && a.name !== '' && names.includes(a.name);
}

interface Grant {
  readonly rules: PolicyRule[];
  readonly describe: string;
}

export class RbacAuthorizer {
  readonly #store: ObjectStore;

  constructor(store: ObjectStore) {
    this.#store = store;
  }

  /** Every role's rules that apply to `user` in `namespace` (cluster-wide ones always). */
  #grants(user: UserInfo, namespace: string | undefined): Grant[] {
    const out: Grant[] = [];
    for (const b of this.#store.list(CRB)) {
      const subject = ((b.subjects as Subject[] | undefined) ?? []).find((s) => subjectMatches(s, user, undefined));
      const ref = b.roleRef as { kind?: string; name?: string } | undefined;
      if (!subject || ref?.kind !== 'ClusterRole' || !ref.name) continue;
      out.push({
        rules: rulesOf(this.#store.get(CLUSTER_ROLE, undefined, ref.name)),
        describe: `ClusterRoleBinding "${b.metadata.name}" of ClusterRole "${ref.name}" to ${describeSubject(subject, undefined)}`,
      });
    }
    if (namespace) {
      for (const b of this.#store.list(RB, namespace)) {
        const subject = ((b.subjects as Subject[] | undefined) ?? []).find((s) => subjectMatches(s, user, namespace));
        const ref = b.roleRef as { kind?: string; name?: string } | undefined;
        if (!subject || !ref?.name) continue;
        const role = ref.kind === 'ClusterRole' ? this.#store.get(CLUSTER_ROLE, undefined, ref.name) : ref.kind === 'Role' ? this.#store.get(ROLE, namespace, ref.name) : undefined;
        out.push({
          rules: rulesOf(role),
          describe: `RoleBinding "${b.metadata.name}/${namespace}" of ${ref.kind} "${ref.name}" to ${describeSubject(subject, namespace)}`,
        });
      }
    }
    return out;
  }

  authorize(a: Attributes): Decision {
    if (a.user.groups.includes('system:masters')) return { allowed: true, reason: '' };
    if (nodeAuthorizerAllows(a)) return { allowed: true, reason: 'Node authorizer' };
    for (const g of this.#grants(a.user, a.resourceRequest ? a.namespace : undefined)) {
      if (g.rules.some((r) => ruleAllows(r, a))) return { allowed: true, reason: `RBAC: allowed by ${g.describe}` };
    }
    return { allowed: false, reason: '' };
  }

  /** The rules that apply in `namespace`, for SelfSubjectRulesReview. */
  rulesFor(user: UserInfo, namespace: string): { resourceRules: PolicyRule[]; nonResourceRules: PolicyRule[] } {
    if (user.groups.includes('system:masters')) {
      return {
        resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }],
        nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
      };
    }
    const resourceRules: PolicyRule[] = [];
    const nonResourceRules: PolicyRule[] = [];
    for (const g of this.#grants(user, namespace)) {
      for (const r of g.rules) {
        if ((r.nonResourceURLs ?? []).length > 0) nonResourceRules.push({ verbs: r.verbs, nonResourceURLs: r.nonResourceURLs ?? [] });
        if ((r.resources ?? []).length > 0) {
          resourceRules.push({
            verbs: r.verbs,
            apiGroups: r.apiGroups ?? [],
            resources: r.resources ?? [],
            ...((r.resourceNames ?? []).length > 0 ? { resourceNames: r.resourceNames ?? [] } : {}),
          });
        }
      }
    }
    return { resourceRules, nonResourceRules };
  }
}

/**
 * certauthorization.IsAuthorizedForSignerName: `verb` (approve, sign, attest) on `signers` named after
 * the signer name, or its `<domain>/*` wildcard.
 */
export function isAuthorizedForSignerName(rbac: RbacAuthorizer, user: UserInfo, verb: string, signerName: string): boolean {
  const names = [signerName, `${signerName.split('/')[0]}/*`];
  return names.some((name) => rbac.authorize({ user, resourceRequest: true, verb, apiGroup: 'certificates.k8s.io', resource: 'signers', name }).allowed);
}

/** The message the real API server puts in a 403 Status. */
export function forbiddenMessage(a: Attributes): string {
  const who = `User "${a.user.username}"`;
  if (!a.resourceRequest) return `forbidden: ${who} cannot ${a.verb} path "${a.path ?? ''}"`;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : (a.resource ?? '');
  const qualified = a.apiGroup ? `${a.resource}.${a.apiGroup}` : (a.resource ?? '');
  const head = a.name ? `${qualified} "${a.name}" is forbidden` : `${qualified} is forbidden`;
  const scope = a.namespace ? `in the namespace "${a.namespace}"` : 'at the cluster scope';
  return `${head}: ${who} cannot ${a.verb} resource "${resource}" in API group "${a.apiGroup ?? ''}" ${scope}`;
}
