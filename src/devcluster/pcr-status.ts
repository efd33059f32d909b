/**
 * PodCertificateRequest `/status` validation as kube-apiserver 1.35 does it
 * (ValidatePodCertificateRequestStatusUpdate): at most one of Issued/Denied/Failed, each True,
 * no other condition types, metav1 condition rules; a request already Issued, Denied or Failed
 * has an immutable status; Denied/Failed carry conditions only; Issued carries a chain whose
 * leaf was issued to the requested key, with notBefore/notAfter equal to the leaf's, notBefore
 * within 5 minutes of the server's clock, a lifetime in [1 h, maxExpirationSeconds], and
 * beginRefreshAt in [notBefore + 10 min, notAfter - 10 min] — all set in the same write.
 */
import { X509Certificate, createPublicKey } from 'node:crypto';
import type { KubeObject } from './store.js';
import type { StatusCause } from './status.js';
import { canonicalJson } from './admission.js';
import { MAX_PCR_CHAIN_BYTES, requestedSpki, specOf, statusOf, type PcrCondition, type PcrStatus } from './pcr-validation.js';

export const PCR_CONDITION_TYPES = ['Issued', 'Denied', 'Failed'] as const;
const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const MINUTE_MS = 60_000;

function terminal(s: PcrStatus): string | undefined {
  return (s.conditions ?? []).find((c) => (PCR_CONDITION_TYPES as readonly unknown[]).includes(c.type) && c.status === 'True')?.type as string | undefined;
}

/** The terminal condition type of a stored request, if it has one. */
export function pcrState(o: KubeObject): 'Issued' | 'Denied' | 'Failed' | undefined {
  return terminal(statusOf(o)) as 'Issued' | 'Denied' | 'Failed' | undefined;
}

function conditionCauses(conditions: readonly PcrCondition[]): StatusCause[] {
  const out: StatusCause[] = [];
  let known = 0;
  conditions.forEach((c, i) => {
    const at = `status.conditions[${i}]`;
    if ((PCR_CONDITION_TYPES as readonly unknown[]).includes(c.type)) {
      known++;
      if (known > 1) out.push({ field: `${at}.type`, message: `Invalid value: "${String(c.type)}": There may be at most one condition with type "Issued", "Denied", or "Failed"` });
      if (c.status !== 'True') out.push({ field: `${at}.status`, reason: 'FieldValueNotSupported', message: `Unsupported value: "${String(c.status)}": supported values: "True"` });
    } else {
      out.push({ field: `${at}.type`, reason: 'FieldValueNotSupported', message: `Unsupported value: "${String(c.type)}": supported values: "Issued", "Denied", "Failed"` });
    }
    if (typeof c.reason !== 'string' || c.reason === '') out.push({ field: `${at}.reason`, reason: 'FieldValueRequired', message: 'Required value' });
    else if (!REASON.test(c.reason) || c.reason.length > 1024) out.push({ field: `${at}.reason`, message: `Invalid value: "${c.reason}": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'` });
    if (c.message !== undefined && (typeof c.message !== 'string' || c.message.length > 32768)) out.push({ field: `${at}.message`, message: 'Invalid value: must be a string of at most 32768 characters' });
    if (typeof c.lastTransitionTime !== 'string' || Number.isNaN(Date.parse(c.lastTransitionTime))) out.push({ field: `${at}.lastTransitionTime`, reason: 'FieldValueRequired', message: 'Required value: must be set' });
  });
  return out;
}

/** Semantic equality: an empty condition list is no condition list (Go's nil vs empty slice). */
function sameStatus(a: PcrStatus, b: PcrStatus): boolean {
  const norm = (s: PcrStatus): PcrStatus => (Array.isArray(s.conditions) && s.conditions.length === 0 ? { ...s, conditions: undefined } : s);
  return canonicalJson(norm(a)) === canonicalJson(norm(b));
}

function time(v: unknown): number | undefined {
  if (typeof v !== 'string') return undefined;
  const ms = Date.parse(v);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The checks on an Issued transition (the chain, its key, the three timestamps). */
function issuedCauses(current: KubeObject, s: PcrStatus, nowMs: number): StatusCause[] {
  const chain = typeof s.certificateChain === 'string' ? s.certificateChain : '';
  const field = 'status.certificateChain';
  if (chain.length > MAX_PCR_CHAIN_BYTES) return [{ field, reason: 'FieldValueTooLong', message: `Too long: may not be more than ${MAX_PCR_CHAIN_BYTES} bytes` }];
  const blocks = [...chain.matchAll(/-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g)];
  if (blocks.length === 0) return [{ field, message: 'Invalid value: issued certificate chain must contain at least one certificate' }];
  if (blocks.some((b) => b[1] !== 'CERTIFICATE')) return [{ field, message: 'Invalid value: issued certificate chain must consist entirely of CERTIFICATE PEM blocks' }];
  let certs: X509Certificate[];
  try {
    certs = blocks.map((b) => new X509Certificate(Buffer.from(b[2]!.replace(/\s+/g, ''), 'base64')));
  } catch {
    return [{ field, message: 'Invalid value: leaf certificate does not parse as valid X.509' }];
  }
  const leaf = certs[0]!;
  const wanted = createPublicKey({ key: requestedSpki(specOf(current)), format: 'der', type: 'spki' });
  if (!leaf.publicKey.equals(wanted)) return [{ field, message: 'Invalid value: leaf certificate was not issued to the requested public key' }];
  const notBefore = time(s.notBefore);
  const notAfter = time(s.notAfter);
  const refresh = time(s.beginRefreshAt);
  const missing: StatusCause[] = [];
  if (notBefore === undefined) missing.push({ field: 'status.notBefore', reason: 'FieldValueRequired', message: 'Required value: must be present and consistent with the issued certificate' });
  if (notAfter === undefined) missing.push({ field: 'status.notAfter', reason: 'FieldValueRequired', message: 'Required value: must be present and consistent with the issued certificate' });
  if (refresh === undefined) missing.push({ field: 'status.beginRefreshAt', reason: 'FieldValueRequired', message: 'Required value: must be present and in the range [notbefore+10min, notafter-10min]' });
  if (missing.length > 0) return missing;
  const leafFrom = Date.parse(leaf.validFrom);
  const leafTo = Date.parse(leaf.validTo);
  if (notBefore !== leafFrom) return [{ field: 'status.notBefore', message: 'Invalid value: must be set to the NotBefore time encoded in the leaf certificate' }];
  if (Math.abs(notBefore! - nowMs) >= 5 * MINUTE_MS) return [{ field: 'status.notBefore', message: "Invalid value: must be set to within 5 minutes of kube-apiserver's current time" }];
  if (notAfter !== leafTo) return [{ field: 'status.notAfter', message: 'Invalid value: must be set to the NotAfter time encoded in the leaf certificate' }];
  const lifetimeMs = leafTo - leafFrom;
  const max = Number(specOf(current).maxExpirationSeconds);
  if (lifetimeMs < 60 * MINUTE_MS) return [{ field, message: 'Invalid value: leaf certificate lifetime must be >= 1 hour' }];
  if (lifetimeMs > max * 1000) return [{ field, message: `Invalid value: leaf certificate lifetime must be <= spec.maxExpirationSeconds (${max})` }];
  if (refresh! < notBefore! + 10 * MINUTE_MS) return [{ field: 'status.beginRefreshAt', message: 'Invalid value: must be at least 10 minutes after status.notBefore' }];
  if (refresh! > notAfter! - 10 * MINUTE_MS) return [{ field: 'status.beginRefreshAt', message: 'Invalid value: must be at least 10 minutes before status.notAfter' }];
  return [];
}

/** ValidatePodCertificateRequestStatusUpdate: causes for `next.status` replacing `current.status`. */
export function pcrStatusCauses(current: KubeObject, next: KubeObject, nowMs: number): StatusCause[] {
  const s = statusOf(next);
  const old = statusOf(current);
  const conditions = Array.isArray(s.conditions) ? s.conditions : [];
  const causes = conditionCauses(conditions);
  if (causes.length > 0) return causes;
  if (terminal(old) !== undefined) {
    return sameStatus(s, old) ? [] : [{ field: 'status', message: 'Invalid value: immutable after PodCertificateRequest is issued, denied, or failed' }];
  }
  const state = terminal(s);
  if (state === 'Denied' || state === 'Failed') {
    return sameStatus(s, { conditions: s.conditions ?? [] }) ? [] : [{ field: 'status', message: 'Invalid value: non-condition status fields must be empty when denying or failing the PodCertificateRequest' }];
  }
  if (state === 'Issued') return issuedCauses(current, s, nowMs);
  return sameStatus(s, old) ? [] : [{ field: 'status', message: 'Invalid value: status is immutable unless transitioning to "Issued", "Denied", or "Failed"' }];
}
