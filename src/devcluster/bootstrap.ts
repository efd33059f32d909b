/**
 * What a fresh cluster holds before anyone touches it: the system namespaces and the bootstrap
 * RBAC a real cluster ships that our parts depend on (cluster-admin for system:masters,
 * system:auth-delegator for TokenReview/SubjectAccessReview callers, system:basic-user so
 * `kubectl auth can-i` works for everyone, discovery and public-info access). Kept minimal on
 * purpose: anything else a component needs must come from deploy/ and show up in its tests.
 */
const RBAC = 'rbac.authorization.k8s.io/v1';
const DEFAULT_META = { labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' }, annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' } };

function clusterRole(name: string, rules: object[]): object {
  return { apiVersion: RBAC, kind: 'ClusterRole', metadata: { name, ...DEFAULT_META }, rules };
}

function bindGroup(name: string, role: string, groups: readonly string[]): object {
  return {
    apiVersion: RBAC,
    kind: 'ClusterRoleBinding',
    metadata: { name, ...DEFAULT_META },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: groups.map((g) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: g })),
  };
}

export const SYSTEM_NAMESPACES = ['default', 'kube-system', 'kube-public', 'kube-node-lease'] as const;

export function bootstrapObjects(): object[] {
  return [
    ...SYSTEM_NAMESPACES.map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } })),
    clusterRole('cluster-admin', [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
      { nonResourceURLs: ['*'], verbs: ['*'] },
    ]),
    clusterRole('system:auth-delegator', [
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ]),
    clusterRole('system:basic-user', [
      { apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'], verbs: ['create'] },
      { apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'], verbs: ['create'] },
    ]),
    clusterRole('system:discovery', [
      { nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*', '/healthz', '/livez', '/openapi', '/openapi/*', '/readyz', '/version', '/version/'], verbs: ['get'] },
    ]),
    clusterRole('system:public-info-viewer', [{ nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'], verbs: ['get'] }]),
    clusterRole('system:service-account-issuer-discovery', [{ nonResourceURLs: ['/.well-known/openid-configuration', '/.well-known/openid-configuration/', '/openid/v1/jwks', '/openid/v1/jwks/'], verbs: ['get'] }]),
    bindGroup('cluster-admin', 'cluster-admin', ['system:masters']),
    bindGroup('system:basic-user', 'system:basic-user', ['system:authenticated']),
    bindGroup('system:discovery', 'system:discovery', ['system:authenticated']),
    bindGroup('system:public-info-viewer', 'system:public-info-viewer', ['system:authenticated', 'system:unauthenticated']),
    bindGroup('system:service-account-issuer-discovery', 'system:service-account-issuer-discovery', ['system:serviceaccounts']),
  ];
}
