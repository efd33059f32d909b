/**
 * Pods as the broker reads them from the API server (@kubernetes/client-node): `podFacts` turns
 * a V1Pod into the plain `PodFacts` the cache room works with, and `kubePodLookup` reads one pod
 * fresh for a CNI registration.
 */
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { abortableApi } from '../../kube/abortable-http.js';
import type { PodFacts } from '../cache/node-pods.js';
import type { PodLookup } from './registration-server.js';

export function podFacts(p: V1Pod): PodFacts | undefined {
  const m = p.metadata;
  if (!m?.name || !m.namespace || !m.uid) return undefined;
  return {
    uid: m.uid,
    namespace: m.namespace,
    name: m.name,
    // Never defaulted: the API server sets it on every ordinary pod; an empty one (a mirror pod)
    // means no identity (NodePods: 'no-service-account').
    serviceAccount: p.spec?.serviceAccountName ?? '',
    nodeName: p.spec?.nodeName ?? '',
    hostNetwork: p.spec?.hostNetwork === true,
    deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
    phase: p.status?.phase,
  };
}

function httpStatusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown; body?: { code?: unknown } };
  for (const v of [e?.code, e?.statusCode, e?.body?.code]) if (typeof v === 'number') return v;
  return undefined;
}

/**
 * Reads one pod straight from the API server (fresh, unlike the watch cache). The request
 * honours `signal` (the registration's deadline, or its client going away): aborting it closes
 * its connection, so an API server that never answers holds nothing.
 */
export function kubePodLookup(kubeConfig: KubeConfig): PodLookup {
  return async (namespace, name, signal) => {
    try {
      const pod = await abortableApi(kubeConfig, CoreV1Api, signal).readNamespacedPod({ namespace, name });
      return podFacts(pod);
    } catch (err) {
      if (httpStatusOf(err) === 404) return undefined;
      throw err;
    }
  };
}
