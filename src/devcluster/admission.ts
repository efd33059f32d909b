/**
 * What the API server does to an object between decoding and storing it: metadata stamping
 * (uid, creationTimestamp, generation, generateName), per-kind defaults (pod service account,
 * phase Pending, namespace phase Active, secret stringData), validation (names, labels, pod
 * containers, pod spec immutability) and the status-subresource split. Errors are 4xx Status
 * objects shaped as the real ones.
 */
import { randomUUID, randomInt } from 'node:crypto';
import type { KubeObject, ObjectMeta } from './store.js';
import { apiVersionOf, type ResourceType } from './resources.js';
import { badRequest, conflict, invalid, MODIFIED_MESSAGE, type StatusCause } from './status.js';
import { podCertificateSourceCauses } from './pod-certificate-validation.js';
import { checkLease, requireResourceVersion } from './lease-rules.js';
import { checkClusterTrustBundle, isClusterTrustBundle } from './trust-bundle-rules.js';
import { admitCsrCreate, admitCsrUpdate, isCsr } from './csr-rules.js';

export const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const GENERATE_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

export const SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MSG =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

export function isoSeconds(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function nameCauses(t: ResourceType, name: string): StatusCause[] {
  if (t.group === 'rbac.authorization.k8s.io') {
    if (name === '.' || name === '..' || name.includes('/') || name.includes('%')) {
      return [{ field: 'metadata.name', message: `Invalid value: "${name}": may not contain '/' or '%' and may not be '.' or '..'` }];
    }
    return [];
  }
  if (isClusterTrustBundle(t)) return []; // its name depends on spec.signerName: trust-bundle-rules.ts
  if (t.plural === 'namespaces') {
    if (!LABEL.test(name) || name.length > 63) return [{ field: 'metadata.name', message: `Invalid value: "${name}": ${LABEL_MSG}` }];
    return [];
  }
  if (!SUBDOMAIN.test(name) || name.length > 253) return [{ field: 'metadata.name', message: `Invalid value: "${name}": ${SUBDOMAIN_MSG}` }];
  return [];
}

function mapCauses(field: string, m: unknown, checkValues: boolean): StatusCause[] {
  if (m === undefined || m === null) return [];
  if (typeof m !== 'object' || Array.isArray(m)) return [{ field, message: 'Invalid value: must be a map of strings', reason: 'FieldValueTypeInvalid' }];
  const out: StatusCause[] = [];
  for (const [k, v] of Object.entries(m)) {
    const [prefix, tail] = k.includes('/') ? [k.slice(0, k.indexOf('/')), k.slice(k.indexOf('/') + 1)] : ['', k];
    if (!QUALIFIED.test(k) || tail.length > 63 || prefix.length > 253) out.push({ field, message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character` });
    if (typeof v !== 'string') out.push({ field: `${field}[${k}]`, message: 'Invalid value: must be a string', reason: 'FieldValueTypeInvalid' });
    else if (checkValues && (!LABEL_VALUE.test(v) || v.length > 63)) out.push({ field: `${field}[${k}]`, message: `Invalid value: "${v}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character` });
  }
  return out;
}

function podSpecCauses(spec: unknown): StatusCause[] {
  const s = (spec ?? {}) as Record<string, unknown>;
  const containers = s.containers;
  if (!Array.isArray(containers) || containers.length === 0) return [{ field: 'spec.containers', message: 'Required value', reason: 'FieldValueRequired' }];
  const out: StatusCause[] = [];
  containers.forEach((c: Record<string, unknown>, i) => {
    if (typeof c?.name !== 'string' || c.name === '') out.push({ field: `spec.containers[${i}].name`, message: 'Required value', reason: 'FieldValueRequired' });
    if (typeof c?.image !== 'string' || c.image === '') out.push({ field: `spec.containers[${i}].image`, message: 'Required value', reason: 'FieldValueRequired' });
  });
  out.push(...podCertificateSourceCauses(s));
  return out;
}

/** JSON with object keys sorted, so equal values compare equal whatever order clients send. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** The parts of a pod spec that may change after creation are stripped before comparing. */
function immutablePodSpec(spec: unknown): string {
  const s = structuredClone((spec ?? {}) as Record<string, unknown>);
  delete s.activeDeadlineSeconds;
  delete s.tolerations;
  delete s.terminationGracePeriodSeconds;
  for (const key of ['containers', 'initContainers']) {
    const list = s[key];
    if (Array.isArray(list)) for (const c of list) if (c && typeof c === 'object') delete (c as Record<string, unknown>).image;
  }
  return canonicalJson(s);
}

function checkTypeMeta(t: ResourceType, obj: KubeObject): void {
  const want = apiVersionOf(t);
  if (obj.apiVersion !== undefined && obj.apiVersion !== want) {
    throw badRequest(`the API version in the data (${String(obj.apiVersion)}) does not match the expected API version (${want})`);
  }
  if (obj.kind !== undefined && obj.kind !== t.kind) {
    throw badRequest(`the kind in the data (${String(obj.kind)}) does not match the expected kind (${t.kind})`);
  }
  obj.apiVersion = want;
  obj.kind = t.kind;
}

function validateMeta(t: ResourceType, meta: ObjectMeta): void {
  const name = meta.name ?? '';
  const causes = [...nameCauses(t, name), ...mapCauses('metadata.labels', meta.labels, true), ...mapCauses('metadata.annotations', meta.annotations, false)];
  if (causes.length > 0) throw invalid(t.kind, t.group, name, causes);
}

export interface CreateContext {
  readonly nowMs: number;
  readonly namespace: string | undefined;
  /** The requester, for CSR spec.username/groups. */
  readonly user?: { username: string; uid?: string; groups: readonly string[]; extra?: Readonly<Record<string, readonly string[]>> };
}

/** Validates and defaults a new object; returns the object to store. */
export function admitCreate(t: ResourceType, input: unknown, ctx: CreateContext): KubeObject {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw badRequest(`the body of the request must be a ${t.kind} object`);
  const obj = structuredClone(input) as KubeObject;
  checkTypeMeta(t, obj);
  if (obj.metadata === undefined || obj.metadata === null) obj.metadata = {};
  if (typeof obj.metadata !== 'object' || Array.isArray(obj.metadata)) throw badRequest('metadata must be an object');
  const meta = obj.metadata;
  if (t.namespaced) {
    if (meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== ctx.namespace) {
      throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
    }
    meta.namespace = ctx.namespace;
  } else delete meta.namespace;
  if ((meta.name === undefined || meta.name === '') && typeof meta.generateName === 'string' && meta.generateName !== '') {
    let suffix = '';
    for (let i = 0; i < 5; i++) suffix += GENERATE_CHARS[randomInt(GENERATE_CHARS.length)];
    meta.name = meta.generateName + suffix;
  }
  if (meta.name === undefined || meta.name === '') {
    throw invalid(t.kind, t.group, '', [{ field: 'metadata.name', message: 'Required value: name or generateName is required', reason: 'FieldValueRequired' }]);
  }
  validateMeta(t, meta);
  meta.uid = randomUUID();
  meta.creationTimestamp = isoSeconds(ctx.nowMs);
  delete meta.resourceVersion;
  delete meta.deletionTimestamp;
  if (obj.spec !== undefined) meta.generation = 1;
  else delete meta.generation;
  defaultKind(t, obj, ctx);
  return obj;
}

function defaultKind(t: ResourceType, obj: KubeObject, ctx: CreateContext): void {
  const key = `${t.group}/${t.plural}`;
  switch (key) {
    case '/namespaces':
      obj.metadata.labels = { ...(obj.metadata.labels ?? {}), 'kubernetes.io/metadata.name': obj.metadata.name! };
      obj.spec = { finalizers: ['kubernetes'] };
      obj.status = { phase: 'Active' };
      break;
    case '/pods': {
      const causes = podSpecCauses(obj.spec);
      if (causes.length > 0) throw invalid(t.kind, t.group, obj.metadata.name!, causes);
      const spec = obj.spec as Record<string, unknown>;
      const sa = (spec.serviceAccountName as string | undefined) || (spec.serviceAccount as string | undefined) || 'default';
      spec.serviceAccountName = sa;
      spec.serviceAccount = sa;
      spec.restartPolicy ??= 'Always';
      spec.dnsPolicy ??= 'ClusterFirst';
      spec.schedulerName ??= 'default-scheduler';
      spec.terminationGracePeriodSeconds ??= 30;
      spec.enableServiceLinks ??= true;
      spec.priority ??= 0;
      spec.securityContext ??= {};
      obj.status = { phase: 'Pending', qosClass: 'BestEffort' };
      delete obj.metadata.generation;
      break;
    }
    case '/secrets': {
      obj.type ??= 'Opaque';
      const sd = obj.stringData as Record<string, unknown> | undefined;
      if (sd && typeof sd === 'object') {
        const data = { ...((obj.data as Record<string, string> | undefined) ?? {}) };
        for (const [k, v] of Object.entries(sd)) data[k] = Buffer.from(String(v)).toString('base64');
        obj.data = data;
      }
      delete obj.stringData;
      break;
    }
    case 'certificates.k8s.io/certificatesigningrequests':
      admitCsrCreate(obj, ctx.user);
      break;
    case 'coordination.k8s.io/leases':
      checkLease(obj);
      break;
    case 'certificates.k8s.io/clustertrustbundles':
      checkClusterTrustBundle(obj);
      break;
    default:
      if (t.subresources?.includes('status') && obj.status === undefined) obj.status = {};
  }
}

/** Kinds whose strategy refuses an update without a resourceVersion, and their extra checks. */
function admitKindUpdate(t: ResourceType, next: KubeObject, input: KubeObject, name: string, current: KubeObject, subresource?: string, nowMs = Date.now()): void {
  if (isClusterTrustBundle(t)) checkClusterTrustBundle({ ...next, metadata: { ...next.metadata, name } }, current);
  if (isCsr(t)) admitCsrUpdate(next, current, input, subresource, nowMs);
  if (t.group === 'coordination.k8s.io' && t.plural === 'leases') {
    requireResourceVersion(name, input.metadata.resourceVersion);
    checkLease(next);
  }
}

export interface UpdateContext {
  readonly nameFromUrl: string;
  readonly subresource: string | undefined;
  /** Now, for condition timestamps (CSRs); default the wall clock. */
  readonly nowMs?: number;
}

/** Merges an update onto the stored object under the real server's rules. */
export function admitUpdate(t: ResourceType, current: KubeObject, input: unknown, ctx: UpdateContext): KubeObject {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw badRequest(`the body of the request must be a ${t.kind} object`);
  const obj = structuredClone(input) as KubeObject;
  checkTypeMeta(t, obj);
  if (obj.metadata === undefined || obj.metadata === null || typeof obj.metadata !== 'object') obj.metadata = {};
  const meta = obj.metadata;
  if (meta.name !== undefined && meta.name !== '' && meta.name !== ctx.nameFromUrl) {
    throw badRequest(`the name of the object (${meta.name}) does not match the name on the URL (${ctx.nameFromUrl})`);
  }
  if (t.namespaced && meta.namespace !== undefined && meta.namespace !== '' && meta.namespace !== current.metadata.namespace) {
    throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
  if (meta.resourceVersion !== undefined && meta.resourceVersion !== '' && meta.resourceVersion !== current.metadata.resourceVersion) {
    throw conflict(t.plural, t.group, ctx.nameFromUrl, MODIFIED_MESSAGE);
  }
  if (meta.uid !== undefined && meta.uid !== '' && meta.uid !== current.metadata.uid) {
    throw conflict(t.plural, t.group, ctx.nameFromUrl, `Precondition failed: UID in precondition: ${meta.uid}, UID in object meta: ${current.metadata.uid}`);
  }
  let next: KubeObject;
  if (ctx.subresource === 'status') {
    // As the real status strategies: the spec stays; metadata (labels, annotations) may change,
    // except what each kind protects (pods: ownerReferences; apps: labels).
    next = obj;
    next.metadata = { ...meta };
    if (current.spec !== undefined) next.spec = structuredClone(current.spec);
    else delete next.spec;
    if (t.group === '' && t.plural === 'pods') next.metadata.ownerReferences = structuredClone(current.metadata.ownerReferences);
    if (t.group === 'apps') next.metadata.labels = structuredClone(current.metadata.labels);
    validateMeta(t, { ...next.metadata, name: ctx.nameFromUrl });
  } else if (ctx.subresource === 'approval') {
    next = structuredClone(current);
    const conditions = (obj.status as { conditions?: unknown } | undefined)?.conditions;
    next.status = { ...((current.status as object | undefined) ?? {}), conditions: conditions ?? [] };
  } else {
    next = obj;
    next.metadata = { ...meta };
    if (t.subresources?.includes('status')) next.status = structuredClone(current.status);
    validateMeta(t, { ...next.metadata, name: ctx.nameFromUrl });
    if (t.plural === 'pods' && t.group === '' && immutablePodSpec(next.spec) !== immutablePodSpec(current.spec)) {
      throw invalid(t.kind, t.group, ctx.nameFromUrl, [
        { field: 'spec', reason: 'FieldValueForbidden', message: 'Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)' },
      ]);
    }
    if (t.group === '' && t.plural === 'secrets') {
      const sd = next.stringData as Record<string, unknown> | undefined;
      if (sd && typeof sd === 'object') {
        const data = { ...((next.data as Record<string, string> | undefined) ?? {}) };
        for (const [k, v] of Object.entries(sd)) data[k] = Buffer.from(String(v)).toString('base64');
        next.data = data;
      }
      delete next.stringData;
    }
  }
  admitKindUpdate(t, next, obj, ctx.nameFromUrl, current, ctx.subresource, ctx.nowMs);
  // Identity fields always come from the stored object.
  next.metadata.name = current.metadata.name;
  if (t.namespaced) next.metadata.namespace = current.metadata.namespace;
  else delete next.metadata.namespace;
  next.metadata.uid = current.metadata.uid;
  next.metadata.creationTimestamp = current.metadata.creationTimestamp;
  if (current.metadata.deletionTimestamp !== undefined) next.metadata.deletionTimestamp = current.metadata.deletionTimestamp;
  else delete next.metadata.deletionTimestamp;
  if (current.metadata.generation !== undefined) {
    next.metadata.generation = canonicalJson(next.spec) !== canonicalJson(current.spec) ? current.metadata.generation + 1 : current.metadata.generation;
  }
  return next;
}
