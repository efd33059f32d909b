/**
 * The resource types the devcluster serves: the discovery documents, the URL router and the
 * store all read this one table. Adding a kind that only needs to be stored (no behaviour) is a
 * one-line entry.
 */

export const RW_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'] as const;
const CREATE_ONLY = ['create'] as const;

export interface ResourceType {
  readonly group: string; // '' for core
  readonly version: string;
  readonly plural: string;
  readonly singular: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly verbs: readonly string[];
  readonly shortNames?: readonly string[];
  /** Subresources served besides the object itself (`status`, `token`, `approval`). */
  readonly subresources?: readonly string[];
  /** Create-only virtual resources (reviews) are answered, never stored. */
  readonly virtual?: boolean;
  /** Fields `fieldSelector` may use, besides metadata.name and metadata.namespace. */
  readonly fields?: readonly string[];
}

function rt(r: ResourceType): ResourceType {
  return r;
}

export const RESOURCE_TYPES: readonly ResourceType[] = [
  rt({ group: '', version: 'v1', plural: 'namespaces', singular: 'namespace', kind: 'Namespace', namespaced: false, verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'], shortNames: ['ns'], subresources: ['status'], fields: ['status.phase'] }),
  rt({ group: '', version: 'v1', plural: 'pods', singular: 'pod', kind: 'Pod', namespaced: true, verbs: RW_VERBS, shortNames: ['po'], subresources: ['status'],
    fields: ['spec.nodeName', 'spec.serviceAccountName', 'spec.restartPolicy', 'spec.schedulerName', 'spec.hostNetwork', 'status.phase', 'status.podIP', 'status.nominatedNodeName'] }),
  rt({ group: '', version: 'v1', plural: 'serviceaccounts', singular: 'serviceaccount', kind: 'ServiceAccount', namespaced: true, verbs: RW_VERBS, shortNames: ['sa'], subresources: ['token'] }),
  rt({ group: '', version: 'v1', plural: 'nodes', singular: 'node', kind: 'Node', namespaced: false, verbs: RW_VERBS, shortNames: ['no'], subresources: ['status'], fields: ['spec.unschedulable'] }),
  rt({ group: '', version: 'v1', plural: 'events', singular: 'event', kind: 'Event', namespaced: true, verbs: RW_VERBS, shortNames: ['ev'],
    fields: ['involvedObject.kind', 'involvedObject.namespace', 'involvedObject.name', 'involvedObject.uid', 'involvedObject.apiVersion', 'involvedObject.resourceVersion', 'involvedObject.fieldPath', 'reason', 'reportingComponent', 'source', 'type'] }),
  rt({ group: '', version: 'v1', plural: 'secrets', singular: 'secret', kind: 'Secret', namespaced: true, verbs: RW_VERBS, fields: ['type'] }),
  rt({ group: '', version: 'v1', plural: 'configmaps', singular: 'configmap', kind: 'ConfigMap', namespaced: true, verbs: RW_VERBS, shortNames: ['cm'] }),
  rt({ group: '', version: 'v1', plural: 'services', singular: 'service', kind: 'Service', namespaced: true, verbs: RW_VERBS, shortNames: ['svc'], subresources: ['status'] }),
  rt({ group: 'authentication.k8s.io', version: 'v1', plural: 'tokenreviews', singular: 'tokenreview', kind: 'TokenReview', namespaced: false, verbs: CREATE_ONLY, virtual: true }),
  rt({ group: 'authentication.k8s.io', version: 'v1', plural: 'selfsubjectreviews', singular: 'selfsubjectreview', kind: 'SelfSubjectReview', namespaced: false, verbs: CREATE_ONLY, virtual: true }),
  rt({ group: 'authorization.k8s.io', version: 'v1', plural: 'subjectaccessreviews', singular: 'subjectaccessreview', kind: 'SubjectAccessReview', namespaced: false, verbs: CREATE_ONLY, virtual: true }),
  rt({ group: 'authorization.k8s.io', version: 'v1', plural: 'selfsubjectaccessreviews', singular: 'selfsubjectaccessreview', kind: 'SelfSubjectAccessReview', namespaced: false, verbs: CREATE_ONLY, virtual: true }),
  rt({ group: 'authorization.k8s.io', version: 'v1', plural: 'selfsubjectrulesreviews', singular: 'selfsubjectrulesreview', kind: 'SelfSubjectRulesReview', namespaced: false, verbs: CREATE_ONLY, virtual: true }),
  rt({ group: 'authorization.k8s.io', version: 'v1', plural: 'localsubjectaccessreviews', singular: 'localsubjectaccessreview', kind: 'LocalSubjectAccessReview', namespaced: true, verbs: CREATE_ONLY, virtual: true }),
  rt({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'roles', singular: 'role', kind: 'Role', namespaced: true, verbs: RW_VERBS }),
  rt({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'rolebindings', singular: 'rolebinding', kind: 'RoleBinding', namespaced: true, verbs: RW_VERBS }),
  rt({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterroles', singular: 'clusterrole', kind: 'ClusterRole', namespaced: false, verbs: RW_VERBS }),
  rt({ group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterrolebindings', singular: 'clusterrolebinding', kind: 'ClusterRoleBinding', namespaced: false, verbs: RW_VERBS }),
  rt({ group: 'certificates.k8s.io', version: 'v1', plural: 'certificatesigningrequests', singular: 'certificatesigningrequest', kind: 'CertificateSigningRequest', namespaced: false, verbs: RW_VERBS, shortNames: ['csr'], subresources: ['approval', 'status'], fields: ['spec.signerName'] }),
  rt({ group: 'certificates.k8s.io', version: 'v1beta1', plural: 'clustertrustbundles', singular: 'clustertrustbundle', kind: 'ClusterTrustBundle', namespaced: false, verbs: RW_VERBS, fields: ['spec.signerName'] }),
  rt({ group: 'certificates.k8s.io', version: 'v1beta1', plural: 'podcertificaterequests', singular: 'podcertificaterequest', kind: 'PodCertificateRequest', namespaced: true, verbs: RW_VERBS, shortNames: ['pcr'], subresources: ['status'], fields: ['spec.signerName', 'spec.podName', 'spec.nodeName'] }),
  rt({ group: 'apps', version: 'v1', plural: 'daemonsets', singular: 'daemonset', kind: 'DaemonSet', namespaced: true, verbs: RW_VERBS, shortNames: ['ds'], subresources: ['status'] }),
  rt({ group: 'apps', version: 'v1', plural: 'deployments', singular: 'deployment', kind: 'Deployment', namespaced: true, verbs: RW_VERBS, shortNames: ['deploy'], subresources: ['status'] }),
  rt({ group: 'policy', version: 'v1', plural: 'poddisruptionbudgets', singular: 'poddisruptionbudget', kind: 'PodDisruptionBudget', namespaced: true, verbs: RW_VERBS, shortNames: ['pdb'], subresources: ['status'] }),
  rt({ group: 'flowcontrol.apiserver.k8s.io', version: 'v1', plural: 'flowschemas', singular: 'flowschema', kind: 'FlowSchema', namespaced: false, verbs: RW_VERBS, subresources: ['status'] }),
  rt({ group: 'flowcontrol.apiserver.k8s.io', version: 'v1', plural: 'prioritylevelconfigurations', singular: 'prioritylevelconfiguration', kind: 'PriorityLevelConfiguration', namespaced: false, verbs: RW_VERBS, subresources: ['status'] }),
  rt({ group: 'coordination.k8s.io', version: 'v1', plural: 'leases', singular: 'lease', kind: 'Lease', namespaced: true, verbs: RW_VERBS }),
];

export function apiVersionOf(t: ResourceType): string {
  return t.group === '' ? t.version : `${t.group}/${t.version}`;
}

export function findResource(group: string, version: string, plural: string): ResourceType | undefined {
  return RESOURCE_TYPES.find((t) => t.group === group && t.version === version && t.plural === plural);
}

export function findByKind(apiVersion: string, kind: string): ResourceType | undefined {
  return RESOURCE_TYPES.find((t) => apiVersionOf(t) === apiVersion && t.kind === kind);
}

/** Group names in discovery order (core first, then as listed). */
export function groups(): string[] {
  const out: string[] = [];
  for (const t of RESOURCE_TYPES) if (t.group !== '' && !out.includes(t.group)) out.push(t.group);
  return out;
}

/** The key a type's objects are stored under: `pods`, `roles.rbac.authorization.k8s.io`. */
export function storeKey(t: ResourceType): string {
  return t.group === '' ? t.plural : `${t.plural}.${t.group}`;
}
