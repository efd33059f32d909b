/**
 * One `coordination.k8s.io/v1` Lease, read and written with optimistic concurrency: `get` gives
 * the record with its resourceVersion, `update` sends that resourceVersion back, so a writer
 * that lost a race gets 409 Conflict instead of overwriting the winner. Every request is bounded
 * by `requestTimeoutMs` (real time) and by the caller's signal. A refused request is a
 * `KubeApiError` (`httpStatus` 409 for a conflict or an existing Lease on create); no answer is
 * `ERR_KUBE_UNREACHABLE` (or the deadline's `ERR_DEADLINE_EXCEEDED`).
 *
 * Times are `MicroTime` on the wire: RFC 3339 with exactly six fraction digits, which the API
 * server requires (a plain `Date` serializes three, which it refuses): client-node's `V1MicroTime`.
 * On reads client-node hands the MicroTime strings through unparsed; `timeMs` takes either.
 */
import { CoordinationV1Api, V1MicroTime, type KubeConfig, type V1Lease } from '@kubernetes/client-node';
import { withDeadline } from '../core/deadline.js';
import { abortableApi, asKubeError } from './abortable-http.js';
import { KubeApiError, KubeError } from './errors.js';

/** What a Lease says about its holder (client-go's LeaderElectionRecord). */
export interface LeaseRecord {
  /** '' when nobody holds it (released). */
  readonly holderIdentity: string;
  readonly leaseDurationSeconds: number;
  /** Milliseconds since the epoch; 0 when absent. */
  readonly acquireTimeMs: number;
  readonly renewTimeMs: number;
  readonly leaseTransitions: number;
}

export interface StoredLease {
  readonly record: LeaseRecord;
  readonly resourceVersion: string;
}

export interface LeaseClient {
  /** `namespace/name`, for logs. */
  readonly location: string;
  /** The Lease, or undefined when it does not exist. */
  get(signal?: AbortSignal): Promise<StoredLease | undefined>;
  /** Creates it; a 409 (someone else created it first) is a `KubeApiError`. */
  create(record: LeaseRecord, signal?: AbortSignal): Promise<StoredLease>;
  /** Replaces it if still at `resourceVersion`; a 409 means someone else wrote it since. */
  update(record: LeaseRecord, resourceVersion: string, signal?: AbortSignal): Promise<StoredLease>;
}

/** Default bound of one Lease request (below the default renew deadline, so a hung call cannot outlive it). */
export const LEASE_REQUEST_TIMEOUT_MS = 5_000;

function timeMs(v: unknown): number {
  if (v === undefined || v === null) return 0;
  const t = v instanceof Date ? v.getTime() : Date.parse(String(v));
  return Number.isNaN(t) ? 0 : t;
}

function toStored(lease: V1Lease, what: string): StoredLease {
  const rv = lease.metadata?.resourceVersion;
  if (typeof rv !== 'string' || rv === '') throw new KubeError('ERR_KUBE_RESPONSE_INVALID', `${what}: the Lease has no resourceVersion`, { status: 'unavailable' });
  const spec = lease.spec ?? {};
  return {
    resourceVersion: rv,
    record: {
      holderIdentity: spec.holderIdentity ?? '',
      leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
      acquireTimeMs: timeMs(spec.acquireTime),
      renewTimeMs: timeMs(spec.renewTime),
      leaseTransitions: spec.leaseTransitions ?? 0,
    },
  };
}

export function kubeLeaseClient(options: {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly name: string;
  readonly requestTimeoutMs?: number;
}): LeaseClient {
  const { kubeConfig, namespace, name } = options;
  const location = `${namespace}/${name}`;
  const call = async <T>(verb: string, signal: AbortSignal | undefined, fn: (api: CoordinationV1Api) => Promise<T>): Promise<T> => {
    const what = `${verb} lease ${location}`;
    try {
      return await withDeadline(options.requestTimeoutMs ?? LEASE_REQUEST_TIMEOUT_MS, { what, parent: signal }, (s) => fn(abortableApi(kubeConfig, CoordinationV1Api, s)));
    } catch (err) {
      throw asKubeError(err, what);
    }
  };
  const body = (record: LeaseRecord, resourceVersion?: string): V1Lease => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, ...(resourceVersion ? { resourceVersion } : {}) },
    spec: {
      holderIdentity: record.holderIdentity,
      leaseDurationSeconds: record.leaseDurationSeconds,
      leaseTransitions: record.leaseTransitions,
      // V1MicroTime serializes with six fraction digits (a plain Date would send three).
      ...(record.acquireTimeMs > 0 ? { acquireTime: new V1MicroTime(record.acquireTimeMs) } : {}),
      ...(record.renewTimeMs > 0 ? { renewTime: new V1MicroTime(record.renewTimeMs) } : {}),
    },
  });
  return {
    location,
    async get(signal) {
      try {
        return toStored(await call('get', signal, (api) => api.readNamespacedLease({ name, namespace })), `get lease ${location}`);
      } catch (err) {
        if (err instanceof KubeApiError && err.httpStatus === 404) return undefined;
        throw err;
      }
    },
    async create(record, signal) {
      return toStored(await call('create', signal, (api) => api.createNamespacedLease({ namespace, body: body(record) })), `create lease ${location}`);
    },
    async update(record, resourceVersion, signal) {
      return toStored(await call('update', signal, (api) => api.replaceNamespacedLease({ name, namespace, body: body(record, resourceVersion) })), `update lease ${location}`);
    },
  };
}
