/**
 * `certificates.k8s.io/v1` CertificateSigningRequest as kube-apiserver admits it
 * (pkg/apis/certificates/validation and pkg/registry/certificates/certificates/strategy.go):
 * - **create**: spec.username/uid/groups/extra from the requester; status dropped;
 *   `spec.request` a PEM CERTIFICATE REQUEST that parses; `spec.signerName` by the signer-name
 *   rule; `spec.usages` required, each a known key usage, no duplicates;
 *   `spec.expirationSeconds` at least 600;
 * - **update** (the object): spec and status stay as stored (only metadata changes);
 * - **the approval subresource**: only the Approved and Denied conditions come from the request (the others and
 *   the certificate stay), an Approved or Denied condition cannot be removed;
 * - **the status subresource**: the spec stays, Approved and Denied stay as stored (approval goes through
 *   /approval), the certificate is PEM CERTIFICATE blocks and, once set, cannot change;
 * - **conditions**: type and status required, status True/False/Unknown, Approved, Denied and
 *   Failed at most once each, Approved and Denied exclusive; lastUpdateTime and
 *   lastTransitionTime filled in when missing.
 * The `approve`/`sign` checks on `signers` are the API server's (api-server.ts).
 */
import { signerNameProblem } from '../core/signer-name.js';
import { csrPublicKeyInfo, parsePem } from '../pki/index.js';
import { isoSeconds } from './admission.js';
import type { ResourceType } from './resources.js';
import type { KubeObject } from './store.js';
import { invalid, type StatusCause } from './status.js';

const GROUP = 'certificates.k8s.io';
export const MIN_EXPIRATION_SECONDS = 600;
/** certificates.KeyUsage values. */
export const KEY_USAGES: readonly string[] = [
  'any', 'client auth', 'code signing', 'content commitment', 'crl sign', 'data encipherment', 'decipher only', 'digital signature', 'email protection',
  'encipher only', 'ipsec end system', 'ipsec tunnel', 'ipsec user', 'key agreement', 'key encipherment', 'microsoft sgc', 'netscape sgc', 'ocsp signing',
  's/mime', 'server auth', 'signing', 'timestamping',
];
const APPROVAL_TYPES = ['Approved', 'Denied'];
const CONDITION_STATUSES = ['False', 'True', 'Unknown'];

interface Condition {
  type?: unknown;
  status?: unknown;
  reason?: unknown;
  message?: unknown;
  lastUpdateTime?: unknown;
  lastTransitionTime?: unknown;
}

interface CsrStatus {
  conditions?: Condition[];
  certificate?: string;
}

export function isCsr(t: ResourceType): boolean {
  return t.group === GROUP && t.plural === 'certificatesigningrequests';
}

function fail(name: string, causes: readonly StatusCause[]): never {
  throw invalid('CertificateSigningRequest', GROUP, name, causes);
}

function requestCauses(request: unknown): StatusCause[] {
  if (typeof request !== 'string' || request === '') return [{ field: 'spec.request', message: 'Required value', reason: 'FieldValueRequired' }];
  const pem = Buffer.from(request, 'base64').toString('utf8');
  try {
    const blocks = parsePem(pem);
    if (blocks[0]?.type !== 'CERTIFICATE REQUEST') throw new Error('PEM block type must be CERTIFICATE REQUEST');
    csrPublicKeyInfo(pem);
    return [];
  } catch (err) {
    const why = err instanceof Error && err.message.startsWith('PEM block type') ? err.message : 'PEM block type must be CERTIFICATE REQUEST';
    return [{ field: 'spec.request', message: `Invalid value: []byte{...}: ${why}` }];
  }
}

function usageCauses(usages: unknown): StatusCause[] {
  if (!Array.isArray(usages) || usages.length === 0) return [{ field: 'spec.usages', message: 'Required value', reason: 'FieldValueRequired' }];
  const out: StatusCause[] = [];
  const seen = new Set<unknown>();
  usages.forEach((u, i) => {
    if (!KEY_USAGES.includes(String(u))) out.push({ field: `spec.usages[${i}]`, message: `Unsupported value: ${JSON.stringify(u)}: supported values: ${KEY_USAGES.map((k) => JSON.stringify(k)).join(', ')}`, reason: 'FieldValueNotSupported' });
    else if (seen.has(u)) out.push({ field: `spec.usages[${i}]`, message: `Duplicate value: ${JSON.stringify(u)}`, reason: 'FieldValueDuplicate' });
    seen.add(u);
  });
  return out;
}

/** Validates a new CSR and sets what the server sets. */
export function admitCsrCreate(obj: KubeObject, user: { username: string; uid?: string; groups: readonly string[]; extra?: Readonly<Record<string, readonly string[]>> } | undefined): void {
  const spec = (obj.spec ?? {}) as Record<string, unknown>;
  if (user) {
    spec.username = user.username;
    if (user.uid) spec.uid = user.uid;
    spec.groups = [...user.groups];
    if (user.extra) spec.extra = structuredClone(user.extra);
  }
  const causes = [...requestCauses(spec.request)];
  const signerName = typeof spec.signerName === 'string' ? spec.signerName : '';
  const signerProblem = signerNameProblem(signerName);
  if (signerName === '') causes.push({ field: 'spec.signerName', message: 'Required value', reason: 'FieldValueRequired' });
  else if (signerProblem !== undefined) causes.push({ field: 'spec.signerName', message: `Invalid value: ${JSON.stringify(signerName)}: ${signerProblem}` });
  const exp = spec.expirationSeconds;
  if (exp !== undefined && exp !== null && (typeof exp !== 'number' || !Number.isInteger(exp) || exp < MIN_EXPIRATION_SECONDS)) {
    causes.push({ field: 'spec.expirationSeconds', message: `Invalid value: ${JSON.stringify(exp)}: may not specify a duration less than 600 seconds (10 minutes)` });
  }
  causes.push(...usageCauses(spec.usages));
  if (causes.length > 0) fail(obj.metadata.name ?? '', causes);
  obj.spec = spec;
  obj.status = {};
}

function conditionCauses(conditions: readonly Condition[]): StatusCause[] {
  const out: StatusCause[] = [];
  const seen = new Set<string>();
  conditions.forEach((c, i) => {
    const at = `status.conditions[${i}]`;
    if (typeof c.type !== 'string' || c.type === '') out.push({ field: `${at}.type`, message: 'Required value', reason: 'FieldValueRequired' });
    if (c.status === undefined || c.status === '') out.push({ field: `${at}.status`, message: 'Required value', reason: 'FieldValueRequired' });
    else if (!CONDITION_STATUSES.includes(String(c.status))) out.push({ field: `${at}.status`, message: `Unsupported value: ${JSON.stringify(c.status)}: supported values: "False", "True", "Unknown"`, reason: 'FieldValueNotSupported' });
    const type = String(c.type);
    if ([...APPROVAL_TYPES, 'Failed'].includes(type)) {
      if (seen.has(type)) out.push({ field: `${at}.type`, message: `Duplicate value: ${JSON.stringify(type)}`, reason: 'FieldValueDuplicate' });
      seen.add(type);
    }
  });
  const isTrue = (type: string) => conditions.some((c) => c.type === type && c.status === 'True');
  if (isTrue('Approved') && isTrue('Denied')) out.push({ field: 'status.conditions', message: 'Invalid value: "Denied": Approved and Denied conditions are mutually exclusive' });
  return out;
}

/** lastUpdateTime (when missing) and lastTransitionTime (when missing or the status changed) set to now. */
function stampConditions(conditions: Condition[], old: readonly Condition[], nowMs: number): void {
  const now = isoSeconds(nowMs);
  for (const c of conditions) {
    if (c.lastUpdateTime === undefined || c.lastUpdateTime === null) c.lastUpdateTime = now;
    const before = old.find((o) => o.type === c.type);
    if (c.lastTransitionTime === undefined || c.lastTransitionTime === null) c.lastTransitionTime = before && before.status === c.status && before.lastTransitionTime ? before.lastTransitionTime : now;
  }
}

function conditionsOf(obj: KubeObject | undefined): Condition[] {
  const cs = (obj?.status as CsrStatus | undefined)?.conditions;
  return Array.isArray(cs) ? cs : [];
}

function certificateCauses(certificate: unknown, old: unknown): StatusCause[] {
  if (certificate === undefined || certificate === null || certificate === '') {
    return old ? [{ field: 'status.certificate', message: 'Forbidden: updates may not remove existing certificate content', reason: 'FieldValueForbidden' }] : [];
  }
  if (old && old !== certificate) return [{ field: 'status.certificate', message: 'Forbidden: updates may not modify existing certificate content', reason: 'FieldValueForbidden' }];
  try {
    const blocks = parsePem(Buffer.from(String(certificate), 'base64').toString('utf8'));
    if (blocks.length === 0 || blocks.some((b) => b.type !== 'CERTIFICATE')) throw new Error('not certificates');
    return [];
  } catch {
    return [{ field: 'status.certificate', message: 'Invalid value: "<certificate data>": must contain at least one CERTIFICATE PEM block' }];
  }
}

/**
 * Applies the CSR strategy to `next` (already merged by admission.ts: spec kept for /status and
 * /approval, status kept for the object) and validates it.
 */
export function admitCsrUpdate(next: KubeObject, current: KubeObject, input: KubeObject, subresource: string | undefined, nowMs: number): void {
  const name = current.metadata.name ?? '';
  next.spec = structuredClone(current.spec);
  const old = conditionsOf(current);
  const currentStatus = (current.status ?? {}) as CsrStatus;
  if (subresource === undefined) {
    next.status = structuredClone(current.status);
    return;
  }
  const asked = conditionsOf(input).map((c) => ({ ...c }));
  let conditions: Condition[];
  const causes: StatusCause[] = [];
  if (subresource === 'approval') {
    conditions = [...asked.filter((c) => APPROVAL_TYPES.includes(String(c.type))), ...structuredClone(old.filter((c) => !APPROVAL_TYPES.includes(String(c.type))))];
    for (const type of APPROVAL_TYPES) {
      if (old.some((c) => c.type === type) && !conditions.some((c) => c.type === type)) {
        causes.push({ field: 'status.conditions', message: `Forbidden: updates may not remove a condition of type ${JSON.stringify(type)}`, reason: 'FieldValueForbidden' });
      }
    }
    next.status = { ...structuredClone(currentStatus), conditions };
  } else {
    conditions = [...asked.filter((c) => !APPROVAL_TYPES.includes(String(c.type))), ...structuredClone(old.filter((c) => APPROVAL_TYPES.includes(String(c.type))))];
    const status = ((next.status ?? {}) as CsrStatus);
    causes.push(...certificateCauses(status.certificate, currentStatus.certificate));
    next.status = { ...status, conditions };
  }
  causes.push(...conditionCauses(conditions));
  if (causes.length > 0) fail(name, causes);
  stampConditions(conditions, old, nowMs);
  if (conditions.length === 0) delete (next.status as CsrStatus).conditions;
}
