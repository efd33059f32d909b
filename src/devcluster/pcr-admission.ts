/**
 * What kube-apiserver 1.35 does to a PodCertificateRequest besides storing it: the registry
 * strategy (status cleared on create, maxExpirationSeconds defaulted to 24 h, spec immutable,
 * status only through `/status` and then only by a caller allowed to `sign` for the signer),
 * validation (pcr-validation.ts, pcr-status.ts) and the NodeRestriction plugin's
 * admitPodCertificateRequest: a node (`system:node:<name>` in `system:nodes`) may only ask for
 * a pod bound to itself, naming the pod's service account, with the UIDs the stored pod,
 * service account and node have. Other callers are limited by RBAC alone, as upstream.
 */
import type { KubeObject, ObjectStore } from './store.js';
import { findResource, type ResourceType } from './resources.js';
import type { UserInfo } from './authn.js';
import { nodeNameOf } from './node-authorizer.js';
import { canonicalJson } from './admission.js';
import { forbidden, internalError, invalid, qualifiedResource, type StatusCause } from './status.js';
import { PCR_DEFAULT_MAX_EXPIRATION_SECONDS, pcrCreateCauses, specOf } from './pcr-validation.js';
import { pcrStatusCauses } from './pcr-status.js';

export const PCR = findResource('certificates.k8s.io', 'v1beta1', 'podcertificaterequests')!;
const POD = findResource('', 'v1', 'pods')!;
const NODE = findResource('', 'v1', 'nodes')!;
const SA = findResource('', 'v1', 'serviceaccounts')!;
const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

export interface PcrAdmission {
  readonly store: ObjectStore;
  readonly nowMs: number;
  /** RBAC `sign` on `signers` for this signer name (or its `<domain>/*`). */
  readonly maySign: (user: UserInfo, signerName: string) => boolean;
}

function nodeForbidden(obj: KubeObject, why: string) {
  const name = obj.metadata.name ?? '';
  return forbidden(`${qualifiedResource(PCR.plural, PCR.group)} "${name}" is forbidden: ${why}`, { name, group: PCR.group, kind: PCR.plural });
}

/** NodeRestriction's admitPodCertificateRequest (create). Lookups that informer lag could fail are 500s, as upstream's plain errors. */
function restrictNode(obj: KubeObject, node: string, store: ObjectStore): void {
  const spec = specOf(obj);
  const ns = obj.metadata.namespace;
  const pod = `${ns}/${String(spec.podName)}`;
  if (spec.nodeName !== node) throw nodeForbidden(obj, `PodCertificateRequest.Spec.NodeName=${JSON.stringify(spec.nodeName)}, which is not the requesting node ${JSON.stringify(node)}`);
  const nodeObj = store.get(NODE, undefined, node);
  if (!nodeObj) throw internalError(`while retrieving node "${node}" named in the PodCertificateRequest: node "${node}" not found`);
  if (nodeObj.metadata.uid !== spec.nodeUID) throw internalError(`PodCertificateRequest for pod "${pod}" names node UID "${String(spec.nodeUID)}", inconsistent with the running node ("${nodeObj.metadata.uid}")`);
  const podObj = store.get(POD, ns, String(spec.podName));
  if (!podObj) throw internalError(`while retrieving pod "${pod}" named in the PodCertificateRequest: pod "${String(spec.podName)}" not found`);
  if (podObj.metadata.uid !== spec.podUID) throw internalError(`PodCertificateRequest for pod "${pod}" contains pod UID ("${String(spec.podUID)}") which differs from running pod "${podObj.metadata.uid}"`);
  const podSpec = (podObj.spec ?? {}) as { nodeName?: string; serviceAccountName?: string };
  if (podSpec.nodeName !== node) throw nodeForbidden(obj, `pod "${pod}" is not running on node "${node}" named in the PodCertificateRequest`);
  if (podObj.metadata.annotations?.[MIRROR_POD_ANNOTATION] !== undefined) throw nodeForbidden(obj, `pod "${pod}" is a mirror pod`);
  if (spec.serviceAccountName !== podSpec.serviceAccountName) {
    throw nodeForbidden(obj, `PodCertificateRequest for pod "${pod}" contains serviceAccountName ("${String(spec.serviceAccountName)}") that differs from running pod ("${String(podSpec.serviceAccountName)}")`);
  }
  const sa = store.get(SA, ns, String(spec.serviceAccountName));
  const saRef = `${ns}/${String(spec.serviceAccountName)}`;
  if (!sa) throw internalError(`while retrieving service account "${saRef}" named in the PodCertificateRequest: serviceaccount "${String(spec.serviceAccountName)}" not found`);
  if (sa.metadata.uid !== spec.serviceAccountUID) {
    throw internalError(`PodCertificateRequest for pod "${pod}" names service account UID "${String(spec.serviceAccountUID)}", which differs from the running service account ("${sa.metadata.uid}")`);
  }
}

/** Create: clears status, defaults, validates, then NodeRestriction for node callers. Mutates `obj`. */
export function admitPcrCreate(obj: KubeObject, user: UserInfo | undefined, a: PcrAdmission): void {
  const spec = (obj.spec && typeof obj.spec === 'object' && !Array.isArray(obj.spec) ? obj.spec : {}) as Record<string, unknown>;
  spec.maxExpirationSeconds ??= PCR_DEFAULT_MAX_EXPIRATION_SECONDS;
  obj.spec = spec;
  obj.status = {};
  const causes = pcrCreateCauses(obj);
  if (causes.length > 0) throw invalid(PCR.kind, PCR.group, obj.metadata.name ?? '', causes);
  const node = nodeNameOf(user);
  if (node !== undefined) restrictNode(obj, node, a.store);
}

function immutableSpec(current: KubeObject, next: KubeObject): StatusCause[] {
  if (canonicalJson(next.spec) === canonicalJson(current.spec)) return [];
  return [{ field: 'spec', message: 'Invalid value: field is immutable' }];
}

/**
 * Update of the object (spec immutable; status kept by admitUpdate) or of `/status` (spec kept
 * by admitUpdate; the status rules, then `sign` when the status changes).
 */
export function admitPcrUpdate(t: ResourceType, current: KubeObject, next: KubeObject, sub: string | undefined, user: UserInfo | undefined, a: PcrAdmission): void {
  if (t !== PCR) return;
  const name = current.metadata.name ?? '';
  if (sub !== 'status') {
    const causes = immutableSpec(current, next);
    if (causes.length > 0) throw invalid(PCR.kind, PCR.group, name, causes);
    return;
  }
  // metav1.ResetObjectMetaForStatus: a status write changes no metadata.
  next.metadata = { ...structuredClone(current.metadata), resourceVersion: next.metadata.resourceVersion };
  const causes = pcrStatusCauses(current, next, a.nowMs);
  if (causes.length > 0) throw invalid(PCR.kind, PCR.group, name, causes);
  if (canonicalJson(next.status) === canonicalJson(current.status) || !user) return;
  const signer = String(specOf(current).signerName);
  if (!a.maySign(user, signer)) {
    throw invalid(PCR.kind, PCR.group, name, [{ field: 'spec.signerName', reason: 'FieldValueForbidden', message: `Forbidden: User "${user.username}" is not permitted to "sign" for signer "${signer}"` }]);
  }
}
