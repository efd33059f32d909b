/**
 * What kube-apiserver checks on a `coordination.k8s.io/v1` Lease: the MicroTime fields decode
 * only in RFC 3339 with exactly six fraction digits (metav1.MicroTime's layout; anything else is
 * a 400 decode error), `leaseDurationSeconds` > 0 and `leaseTransitions` >= 0 (422), and an
 * update must carry a resourceVersion (the Lease strategy allows no unconditional update), so
 * two writers cannot overwrite each other blindly.
 */
import type { KubeObject } from './store.js';
import { badRequest, invalid, type StatusCause } from './status.js';

const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;
const MICRO_LAYOUT = '2006-01-02T15:04:05.000000Z07:00';
const TIME_FIELDS = ['acquireTime', 'renewTime'] as const;
const INT_FIELDS = ['leaseDurationSeconds', 'leaseTransitions'] as const;

/** Throws the Status the real server answers for a Lease it cannot store. */
export function checkLease(obj: KubeObject): void {
  const spec = obj.spec;
  if (spec === undefined || spec === null) return;
  if (typeof spec !== 'object' || Array.isArray(spec)) throw badRequest('Lease in version "v1" cannot be handled as a Lease: spec must be an object');
  const s = spec as Record<string, unknown>;
  for (const f of TIME_FIELDS) {
    const v = s[f];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'string' || !MICRO_TIME.test(v) || Number.isNaN(Date.parse(v))) {
      throw badRequest(`Lease in version "v1" cannot be handled as a Lease: parsing time ${JSON.stringify(String(v))} as "${MICRO_LAYOUT}": cannot parse as RFC 3339 with microseconds`);
    }
  }
  for (const f of INT_FIELDS) {
    const v = s[f];
    if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isInteger(v))) {
      throw badRequest(`Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal ${typeof v} into Go struct field LeaseSpec.spec.${f} of type int32`);
    }
  }
  const causes: StatusCause[] = [];
  if (typeof s.leaseDurationSeconds === 'number' && s.leaseDurationSeconds <= 0) causes.push({ field: 'spec.leaseDurationSeconds', message: `Invalid value: ${s.leaseDurationSeconds}: must be greater than 0` });
  if (typeof s.leaseTransitions === 'number' && s.leaseTransitions < 0) causes.push({ field: 'spec.leaseTransitions', message: `Invalid value: ${s.leaseTransitions}: must be greater than or equal to 0` });
  if (causes.length > 0) throw invalid('Lease', 'coordination.k8s.io', obj.metadata.name ?? '', causes);
}

/** An update without a resourceVersion: 422, as the registry answers for strategies without unconditional updates. */
export function requireResourceVersion(name: string, resourceVersion: unknown): void {
  if (typeof resourceVersion === 'string' && resourceVersion !== '') return;
  throw invalid('leases', 'coordination.k8s.io', name, [{ field: 'metadata.resourceVersion', message: 'Invalid value: 0x0: must be specified for an update' }]);
}
