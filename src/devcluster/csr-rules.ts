/**
 * `certificates.k8s.io/v1` CertificateSigningRequest as kube-apiserver admits it
 * (pkg/apis/certificates/validation and pkg/registry/certificates/certificates/strategy.go):
 * - **create**: spec.username/uid/groups/extra from the requester; status dropped;
 *   `spec.request` a PEM CERTIFICATE REQUEST that parses; `spec.signerName` by the signer-name
 *   rule; `spec.usages` required, each a known key usage, no duplicates;
 *   `spec.expirationSeconds` at least 600;
 * - **update** (the object): spec and status stay as stored (only metadata changes);
 * - **the approval subresource**: the conditions come from the request, the certificate stays;
 * - **the status subresource**: the spec stays; Approved and Denied may not be added, removed or
 *   changed (the stored instances win when their count is unchanged, as preserveConditionInstances);
 *   a new certificate is PEM CERTIFICATE blocks and, once set, cannot change;
 * - **every update**: an Approved, Denied or Failed condition cannot be removed;
 * - **conditions**: type and status required, Approved/Denied/Failed only True, the others
 *   True/False/Unknown, no type twice, Approved and Denied exclusive; lastUpdateTime and
 *   lastTransitionTime filled in when missing (a transition time kept while the status is).
 * The `approve`/`sign` checks on `signers` are the API server's (api-server.ts).
 */
import { isDeepStrictEqual } from 'node:util';
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

/** Approved, Denied and Failed may only be True. */
const TRUE_ONLY_TYPES = ['Approved', 'Denied', 'Failed'];

function conditionCauses(conditions: readonly Condition[]): StatusCause[] {
  const out: StatusCause[] = [];
  const seen = new Set<string>();
  let approved = false;
  let denied = false;
  conditions.forEach((c, i) => {
    const at = `status.conditions[${i}]`;
    const type = typeof c.type === 'string' ? c.type : '';
    if (type === '') out.push({ field: `${at}.type`, message: 'Required value', reason: 'FieldValueRequired' });
    const allowed = TRUE_ONLY_TYPES.includes(type) ? ['True'] : CONDITION_STATUSES;
    if (c.status === undefined || c.status === null || c.status === '') out.push({ field: `${at}.status`, message: 'Required value', reason: 'FieldValueRequired' });
    else if (!allowed.includes(String(c.status))) out.push({ field: `${at}.status`, message: `Unsupported value: ${JSON.stringify(c.status)}: supported values: ${allowed.map((v) => JSON.stringify(v)).join(', ')}`, reason: 'FieldValueNotSupported' });
    if (type === 'Approved') approved = true;
    if (type === 'Denied') denied = true;
    if ((type === 'Approved' && denied) || (type === 'Denied' && approved)) out.push({ field: `${at}.type`, message: `Invalid value: ${JSON.stringify(type)}: Approved and Denied conditions are mutually exclusive` });
    if (seen.has(type)) out.push({ field: `${at}.type`, message: `Duplicate value: ${JSON.stringify(type)}`, reason: 'FieldValueDuplicate' });
    seen.add(type);
  });
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

/** The certificate rules of an update that changes it (only /status may). */
function certificateCauses(certificate: unknown, old: unknown): StatusCause[] {
  if (old) return [{ field: 'status.certificate', message: 'Forbidden: updates may not modify existing certificate content', reason: 'FieldValueForbidden' }];
  try {
    const blocks = parsePem(Buffer.from(String(certificate), 'base64').toString('utf8'));
    if (blocks.length === 0) throw new Error('must contain at least one CERTIFICATE PEM block');
    const other = blocks.find((b) => b.type !== 'CERTIFICATE');
    if (other) throw new Error(`only CERTIFICATE PEM blocks are allowed, found ${JSON.stringify(other.type)}`);
    return [];
  } catch (err) {
    return [{ field: 'status.certificate', message: `Invalid value: "<certificate data>": ${err instanceof Error && err.message.includes('CERTIFICATE') ? err.message : 'must contain at least one CERTIFICATE PEM block'}` }];
  }
}

const ofType = (conditions: readonly Condition[], type: string) => conditions.filter((c) => c.type === type);

/** kube-apiserver's preserveConditionInstances: same count of `type` -> the stored instances win. */
function preserveInstances(conditions: Condition[], old: readonly Condition[], type: string): void {
  const before = ofType(old, type);
  const idx = conditions.flatMap((c, i) => (c.type === type ? [i] : []));
  if (idx.length !== before.length) return;
  idx.forEach((at, k) => (conditions[at] = structuredClone(before[k]!)));
}

/** The rules every update path shares, and those of the paths that may not approve. */
function updateCauses(conditions: readonly Condition[], old: readonly Condition[], mayApprove: boolean): StatusCause[] {
  const out: StatusCause[] = [];
  for (const type of ['Approved', 'Denied', 'Failed']) {
    if (ofType(conditions, type).length < ofType(old, type).length) out.push({ field: 'status.conditions', message: `Forbidden: updates may not remove a condition of type ${JSON.stringify(type)}`, reason: 'FieldValueForbidden' });
  }
  if (!mayApprove) {
    for (const type of APPROVAL_TYPES) {
      const now = ofType(conditions, type);
      const before = ofType(old, type);
      if (now.length > before.length) out.push({ field: 'status.conditions', message: `Forbidden: updates may not add a condition of type ${JSON.stringify(type)}`, reason: 'FieldValueForbidden' });
      else if (now.length === before.length && !isDeepStrictEqual(now, before)) out.push({ field: 'status.conditions', message: `Forbidden: updates may not modify a condition of type ${JSON.stringify(type)}`, reason: 'FieldValueForbidden' });
    }
  }
  return out;
}

/**
 * Applies the CSR strategy to `next` (already merged by admission.ts: spec kept for /status and
 * /approval, status kept for the object) and validates it.
 */
export function admitCsrUpdate(next: KubeObject, current: KubeObject, input: KubeObject, subresource: string | undefined, nowMs: number): void {
  next.spec = structuredClone(current.spec);
  if (subresource === undefined) {
    next.status = structuredClone(current.status);
    return;
  }
  const old = conditionsOf(current);
  const currentStatus = (current.status ?? {}) as CsrStatus;
  const conditions = conditionsOf(input).map((c) => ({ ...c }));
  const causes: StatusCause[] = [];
  if (subresource === 'approval') {
    // Only the conditions change through /approval (the certificate stays as stored).
    next.status = { ...structuredClone(currentStatus), conditions };
  } else {
    for (const type of APPROVAL_TYPES) preserveInstances(conditions, old, type);
    const status = (next.status ?? {}) as CsrStatus;
    if ((status.certificate ?? '') !== (currentStatus.certificate ?? '')) causes.push(...certificateCauses(status.certificate, currentStatus.certificate));
    next.status = { ...status, conditions };
  }
  stampConditions(conditions, old, nowMs);
  causes.push(...conditionCauses(conditions), ...updateCauses(conditions, old, subresource === 'approval'));
  if (causes.length > 0) fail(current.metadata.name ?? '', causes);
  if (conditions.length === 0) delete (next.status as CsrStatus).conditions;
}
