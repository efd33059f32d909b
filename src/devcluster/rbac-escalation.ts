/**
 * RBAC escalation prevention, as the real API server enforces it: a caller may create or update
 * a Role/ClusterRole only with permissions it already holds (or with the `escalate` verb), and a
 * RoleBinding/ClusterRoleBinding only to a role whose permissions it holds (or with `bind` on
 * that role). Wildcards must be held as wildcards.
 */
import type { KubeObject, ObjectStore } from './store.js';
import type { ResourceType } from './resources.js';
import type { UserInfo } from './authn.js';
import { CLUSTER_ROLE, ROLE, rulesOf, type Attributes, type PolicyRule, type RbacAuthorizer } from './rbac.js';
import { forbidden, qualifiedResource } from './status.js';

const RBAC_GROUP = 'rbac.authorization.k8s.io';

function describeRule(r: PolicyRule): string {
  const parts: string[] = [];
  if ((r.apiGroups ?? []).length) parts.push(`APIGroups:${JSON.stringify(r.apiGroups)}`);
  if ((r.resources ?? []).length) parts.push(`Resources:${JSON.stringify(r.resources)}`);
  if ((r.resourceNames ?? []).length) parts.push(`ResourceNames:${JSON.stringify(r.resourceNames)}`);
  if ((r.nonResourceURLs ?? []).length) parts.push(`NonResourceURLs:${JSON.stringify(r.nonResourceURLs)}`);
  parts.push(`Verbs:${JSON.stringify(r.verbs)}`);
  return `{${parts.join(', ')}}`;
}

/** The rules (one verb/group/resource/name each) `user` does not hold in `namespace`. */
function missingRules(rbac: RbacAuthorizer, user: UserInfo, rules: readonly PolicyRule[], namespace: string | undefined): PolicyRule[] {
  const missing: PolicyRule[] = [];
  for (const rule of rules) {
    for (const verb of rule.verbs) {
      for (const url of rule.nonResourceURLs ?? []) {
        if (!rbac.authorize({ user, resourceRequest: false, verb, path: url }).allowed) missing.push({ verbs: [verb], nonResourceURLs: [url] });
      }
      for (const group of rule.apiGroups ?? []) {
        for (const res of rule.resources ?? []) {
          const slash = res.indexOf('/');
          const names = (rule.resourceNames ?? []).length > 0 ? rule.resourceNames! : [undefined];
          for (const name of names) {
            const a: Attributes = {
              user,
              resourceRequest: true,
              verb,
              apiGroup: group,
              resource: slash < 0 ? res : res.slice(0, slash),
              ...(slash < 0 ? {} : { subresource: res.slice(slash + 1) }),
              ...(name !== undefined ? { name } : {}),
              ...(namespace ? { namespace } : {}),
            };
            if (!rbac.authorize(a).allowed) missing.push({ verbs: [verb], apiGroups: [group], resources: [res], ...(name !== undefined ? { resourceNames: [name] } : {}) });
          }
        }
      }
    }
  }
  return missing;
}

export function makeEscalationCheck(options: { store: ObjectStore; rbac: RbacAuthorizer }): (t: ResourceType, obj: KubeObject, user: UserInfo) => void {
  const { store, rbac } = options;
  return (t, obj, user) => {
    if (t.group !== RBAC_GROUP || user.groups.includes('system:masters')) return;
    const ns = t.namespaced ? obj.metadata.namespace : undefined;
    const name = obj.metadata.name ?? '';
    const allowedTo = (verb: string, resource: string, resourceName: string | undefined) =>
      rbac.authorize({ user, resourceRequest: true, verb, apiGroup: RBAC_GROUP, resource, ...(resourceName ? { name: resourceName } : {}), ...(ns ? { namespace: ns } : {}) }).allowed;
    let rules: PolicyRule[];
    if (t.plural === 'roles' || t.plural === 'clusterroles') {
      if (allowedTo('escalate', t.plural, name)) return;
      rules = rulesOf(obj);
    } else if (t.plural === 'rolebindings' || t.plural === 'clusterrolebindings') {
      const ref = (obj.roleRef ?? {}) as { kind?: string; name?: string };
      const refResource = ref.kind === 'Role' ? 'roles' : 'clusterroles';
      if (ref.name && allowedTo('bind', refResource, ref.name)) return;
      const role = ref.kind === 'Role' ? store.get(ROLE, ns, ref.name ?? '') : store.get(CLUSTER_ROLE, undefined, ref.name ?? '');
      rules = rulesOf(role);
    } else return;
    const missing = missingRules(rbac, user, rules, ns);
    if (missing.length === 0) return;
    throw forbidden(
      `${qualifiedResource(t.plural, t.group)} "${name}" is forbidden: user "${user.username}" (groups=${JSON.stringify(user.groups)}) is attempting to grant RBAC permissions not currently held:\n${missing.map(describeRule).join('\n')}`,
      { name, group: t.group, kind: t.plural },
    );
  };
}
