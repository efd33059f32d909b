/**
 * The Kubernetes permissions the node broker's code uses, least privilege, as data: deploy/
 * manifests, the local stack and the tests bind exactly these, so a missing or excessive
 * permission shows up as a failing test.
 *
 * - pods get/list/watch (cluster scope: the watch is `fieldSelector=spec.nodeName=<node>`,
 *   the CNI registration lookup is a GET of one pod);
 * - namespaces list/watch (cluster scope): their labels, so the plugin's one-round-trip ambient
 *   ADD is decided from the broker's watches (registration-server.ts, namespace-watch.ts);
 * - serviceaccounts/token create, only for the broker's own service account (TokenRequest) —
 *   left out with `tokenRequest: false`, for a broker that reads its kubelet-projected token
 *   (`BROKER_TOKEN_SOURCE=file`). RBAC cannot limit this permission to the broker's own pod:
 *   whoever holds it can mint tokens bound to any pod of the service account (docs/security.md);
 * - tokenreviews create (cluster scope), for the Istio CA front, which authenticates its callers'
 *   tokens as the CA does — left out with `tokenReview: false`, for a broker without the front
 *   (`ISTIO_CA_FRONT_ADDRESS=off`). A review only says who a token belongs to.
 */
export function brokerRbacObjects(options: {
  readonly namespace: string;
  readonly serviceAccount: string;
  readonly name?: string;
  /** Include `serviceaccounts/token` create (default true). */
  readonly tokenRequest?: boolean;
  /** Include `tokenreviews` create, for the Istio CA front (default true). */
  readonly tokenReview?: boolean;
}): object[] {
  const name = options.name ?? 'certbroker-node-broker';
  const subject = { kind: 'ServiceAccount', name: options.serviceAccount, namespace: options.namespace };
  const rbac = 'rbac.authorization.k8s.io/v1';
  const pods = [
    {
      apiVersion: rbac,
      kind: 'ClusterRole',
      metadata: { name },
      rules: [
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
        // Namespace labels for the one-round-trip ambient ADD (registration-server.ts).
        { apiGroups: [''], resources: ['namespaces'], verbs: ['list', 'watch'] },
        ...(options.tokenReview === false ? [] : [{ apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] }]),
      ],
    },
    {
      apiVersion: rbac,
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [subject],
    },
  ];
  if (options.tokenRequest === false) return pods;
  return [
    ...pods,
    {
      apiVersion: rbac,
      kind: 'Role',
      metadata: { name: `${name}-token`, namespace: options.namespace },
      rules: [{ apiGroups: [''], resources: ['serviceaccounts/token'], resourceNames: [options.serviceAccount], verbs: ['create'] }],
    },
    {
      apiVersion: rbac,
      kind: 'RoleBinding',
      metadata: { name: `${name}-token`, namespace: options.namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${name}-token` },
      subjects: [subject],
    },
  ];
}
