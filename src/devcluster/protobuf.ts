/**
 * Request bodies in `application/vnd.kubernetes.protobuf`, which kubectl's typed commands send
 * (`kubectl create namespace|serviceaccount|token|secret|configmap|role|rolebinding`,
 * `kubectl auth can-i`, `kubectl certificate approve|deny`). The envelope is the 4-byte magic `k8s\0` and a runtime.Unknown
 * {typeMeta, raw}; `raw` is decoded with a small hand-written schema for the kinds kubectl
 * creates this way and turned into the same JSON shape the rest of the server handles.
 * Responses always go back as JSON (clients accept it and decode by Content-Type).
 */
import { badRequest, unsupportedMediaType } from './status.js';

type FieldType = 's' | 'i' | 'b' | 'y' | 't' | `m:${string}` | 'map:s' | 'map:y' | `map:m:${string}`;
/** fieldNumber -> [jsonName, type, repeated] */
type Message = Readonly<Record<number, readonly [string, FieldType, boolean?]>>;

const META: Message = {
  1: ['name', 's'], 2: ['generateName', 's'], 3: ['namespace', 's'], 5: ['uid', 's'], 6: ['resourceVersion', 's'],
  7: ['generation', 'i'], 8: ['creationTimestamp', 't'], 9: ['deletionTimestamp', 't'], 10: ['deletionGracePeriodSeconds', 'i'],
  11: ['labels', 'map:s'], 12: ['annotations', 'map:s'], 13: ['ownerReferences', 'm:OwnerReference', true], 14: ['finalizers', 's', true],
};

const SCHEMA: Readonly<Record<string, Message>> = {
  Unknown: { 1: ['typeMeta', 'm:TypeMeta'], 2: ['raw', 'y'], 3: ['contentEncoding', 's'], 4: ['contentType', 's'] },
  TypeMeta: { 1: ['apiVersion', 's'], 2: ['kind', 's'] },
  ObjectMeta: META,
  OwnerReference: { 1: ['kind', 's'], 3: ['name', 's'], 4: ['uid', 's'], 5: ['apiVersion', 's'], 6: ['controller', 'b'], 7: ['blockOwnerDeletion', 'b'] },
  ObjectReference: { 1: ['kind', 's'], 2: ['namespace', 's'], 3: ['name', 's'], 4: ['uid', 's'], 5: ['apiVersion', 's'], 6: ['resourceVersion', 's'], 7: ['fieldPath', 's'] },
  LocalObjectReference: { 1: ['name', 's'] },
  Namespace: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:NamespaceSpec'] },
  NamespaceSpec: { 1: ['finalizers', 's', true] },
  ServiceAccount: { 1: ['metadata', 'm:ObjectMeta'], 2: ['secrets', 'm:ObjectReference', true], 3: ['imagePullSecrets', 'm:LocalObjectReference', true], 4: ['automountServiceAccountToken', 'b'] },
  Secret: { 1: ['metadata', 'm:ObjectMeta'], 2: ['data', 'map:y'], 3: ['type', 's'], 4: ['stringData', 'map:s'], 5: ['immutable', 'b'] },
  ConfigMap: { 1: ['metadata', 'm:ObjectMeta'], 2: ['data', 'map:s'], 3: ['binaryData', 'map:y'], 4: ['immutable', 'b'] },
  TokenRequest: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:TokenRequestSpec'] },
  TokenRequestSpec: { 1: ['audiences', 's', true], 4: ['expirationSeconds', 'i'], 3: ['boundObjectRef', 'm:BoundObjectReference'] },
  BoundObjectReference: { 1: ['kind', 's'], 2: ['apiVersion', 's'], 3: ['name', 's'], 4: ['uid', 's'] },
  TokenReview: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:TokenReviewSpec'] },
  TokenReviewSpec: { 1: ['token', 's'], 2: ['audiences', 's', true] },
  SelfSubjectAccessReview: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:SelfSubjectAccessReviewSpec'] },
  SelfSubjectAccessReviewSpec: { 1: ['resourceAttributes', 'm:ResourceAttributes'], 2: ['nonResourceAttributes', 'm:NonResourceAttributes'] },
  SubjectAccessReview: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:SubjectAccessReviewSpec'] },
  LocalSubjectAccessReview: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:SubjectAccessReviewSpec'] },
  SubjectAccessReviewSpec: {
    1: ['resourceAttributes', 'm:ResourceAttributes'], 2: ['nonResourceAttributes', 'm:NonResourceAttributes'], 3: ['user', 's'],
    4: ['groups', 's', true], 5: ['extra', 'map:m:ExtraValue'], 6: ['uid', 's'],
  },
  ExtraValue: { 1: ['items', 's', true] },
  // certificates.k8s.io/v1 (kubectl certificate approve|deny PUTs /approval in protobuf).
  CertificateSigningRequest: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:CertificateSigningRequestSpec'], 3: ['status', 'm:CertificateSigningRequestStatus'] },
  CertificateSigningRequestSpec: {
    1: ['request', 'y'], 2: ['username', 's'], 3: ['uid', 's'], 4: ['groups', 's', true], 5: ['usages', 's', true],
    6: ['extra', 'map:m:ExtraValue'], 7: ['signerName', 's'], 8: ['expirationSeconds', 'i'],
  },
  CertificateSigningRequestStatus: { 1: ['conditions', 'm:CertificateSigningRequestCondition', true], 2: ['certificate', 'y'] },
  CertificateSigningRequestCondition: { 1: ['type', 's'], 6: ['status', 's'], 2: ['reason', 's'], 3: ['message', 's'], 4: ['lastUpdateTime', 't'], 5: ['lastTransitionTime', 't'] },
  ResourceAttributes: { 1: ['namespace', 's'], 2: ['verb', 's'], 3: ['group', 's'], 4: ['version', 's'], 5: ['resource', 's'], 6: ['subresource', 's'], 7: ['name', 's'] },
  NonResourceAttributes: { 1: ['path', 's'], 2: ['verb', 's'] },
  SelfSubjectRulesReview: { 1: ['metadata', 'm:ObjectMeta'], 2: ['spec', 'm:SelfSubjectRulesReviewSpec'] },
  SelfSubjectRulesReviewSpec: { 1: ['namespace', 's'] },
  SelfSubjectReview: { 1: ['metadata', 'm:ObjectMeta'] },
  Role: { 1: ['metadata', 'm:ObjectMeta'], 2: ['rules', 'm:PolicyRule', true] },
  ClusterRole: { 1: ['metadata', 'm:ObjectMeta'], 2: ['rules', 'm:PolicyRule', true] },
  PolicyRule: { 1: ['verbs', 's', true], 2: ['apiGroups', 's', true], 3: ['resources', 's', true], 4: ['resourceNames', 's', true], 5: ['nonResourceURLs', 's', true] },
  RoleBinding: { 1: ['metadata', 'm:ObjectMeta'], 2: ['subjects', 'm:Subject', true], 3: ['roleRef', 'm:RoleRef'] },
  ClusterRoleBinding: { 1: ['metadata', 'm:ObjectMeta'], 2: ['subjects', 'm:Subject', true], 3: ['roleRef', 'm:RoleRef'] },
  Subject: { 1: ['kind', 's'], 2: ['apiGroup', 's'], 3: ['name', 's'], 4: ['namespace', 's'] },
  RoleRef: { 1: ['apiGroup', 's'], 2: ['kind', 's'], 3: ['name', 's'] },
  DeleteOptions: { 1: ['gracePeriodSeconds', 'i'], 2: ['preconditions', 'm:Preconditions'], 3: ['orphanDependents', 'b'], 4: ['propagationPolicy', 's'], 5: ['dryRun', 's', true] },
  Preconditions: { 1: ['uid', 's'], 2: ['resourceVersion', 's'] },
  Time: { 1: ['seconds', 'i'], 2: ['nanos', 'i'] },
  MapEntry: { 1: ['key', 's'], 2: ['value', 'y'] },
};

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  get done(): boolean {
    return this.pos >= this.buf.length;
  }

  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      if (this.pos >= this.buf.length) throw badRequest('protobuf: truncated varint');
      const b = this.buf[this.pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
      if (shift > 70n) throw badRequest('protobuf: varint too long');
    }
  }

  bytes(): Buffer {
    const len = Number(this.varint());
    if (len < 0 || this.pos + len > this.buf.length) throw badRequest('protobuf: truncated field');
    const out = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return out;
  }

  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.pos += 8;
    else if (wire === 2) this.bytes();
    else if (wire === 5) this.pos += 4;
    else throw badRequest(`protobuf: unsupported wire type ${wire}`);
    if (this.pos > this.buf.length) throw badRequest('protobuf: truncated field');
  }
}

function decodeMessage(buf: Buffer, name: string, depth = 0): Record<string, unknown> {
  if (depth > 16) throw badRequest('protobuf: nesting too deep');
  const schema = SCHEMA[name];
  if (!schema) throw badRequest(`protobuf: no schema for ${name}`);
  const out: Record<string, unknown> = {};
  const r = new Reader(buf);
  while (!r.done) {
    const tag = Number(r.varint());
    const field = tag >>> 3;
    const wire = tag & 7;
    const spec = schema[field];
    if (!spec) {
      r.skip(wire);
      continue;
    }
    const [key, type, repeated] = spec;
    let value: unknown;
    if (type === 'i' || type === 'b') {
      if (wire !== 0) throw badRequest(`protobuf: field ${name}.${key} has wire type ${wire}`);
      const v = r.varint();
      value = type === 'b' ? v !== 0n : Number(BigInt.asIntN(64, v));
    } else {
      if (wire !== 2) throw badRequest(`protobuf: field ${name}.${key} has wire type ${wire}`);
      const bytes = r.bytes();
      if (type === 's') value = bytes.toString('utf8');
      else if (type === 'y') value = Buffer.from(bytes);
      else if (type === 't') {
        const t = decodeMessage(bytes, 'Time', depth + 1);
        const seconds = (t.seconds as number | undefined) ?? 0;
        value = seconds === 0 ? undefined : new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      } else if (type.startsWith('map:')) {
        const entry = decodeMessage(bytes, 'MapEntry', depth + 1);
        const k = entry.key === undefined ? '' : String(entry.key);
        const raw = (entry.value as Buffer | undefined) ?? Buffer.alloc(0);
        const kind = type.slice(4);
        const v = kind === 's' ? raw.toString('utf8') : kind === 'y' ? raw.toString('base64') : decodeMessage(raw, kind.slice(2), depth + 1);
        const map = (out[key] as Record<string, unknown> | undefined) ?? {};
        map[k] = kind === 'm:ExtraValue' ? ((v as { items?: string[] }).items ?? []) : v;
        out[key] = map;
        continue;
      } else value = decodeMessage(bytes, type.slice(2), depth + 1);
    }
    if (value === undefined) continue;
    if (repeated) ((out[key] as unknown[] | undefined) ?? (out[key] = [] as unknown[]) as unknown[]).push(value);
    else out[key] = value;
  }
  return out;
}

/** Decodes a Kubernetes protobuf body into the JSON object the API would have received. */
export function decodeKubeProtobuf(body: Buffer): Record<string, unknown> {
  if (body.length < 4 || !body.subarray(0, 4).equals(MAGIC)) throw badRequest('protobuf: missing the k8s\\0 envelope prefix');
  const unknown = decodeMessage(body.subarray(4), 'Unknown');
  const typeMeta = (unknown.typeMeta ?? {}) as { apiVersion?: string; kind?: string };
  const kind = typeMeta.kind ?? '';
  if (!SCHEMA[kind] || kind === 'Unknown' || kind === 'TypeMeta' || kind === 'ObjectMeta') {
    throw unsupportedMediaType(`application/vnd.kubernetes.protobuf for kind ${JSON.stringify(kind)}`, ['application/json', 'application/yaml']);
  }
  const raw = (unknown.raw as Buffer | undefined) ?? Buffer.alloc(0);
  return { apiVersion: typeMeta.apiVersion, kind, ...decodeMessage(raw, kind) };
}
