/**
 * The publisher's writes: create or replace the `istio-ca-root-cert` ConfigMap of a namespace
 * and the CA's ClusterTrustBundle (`certificates.k8s.io/v1beta1`), each request bounded by
 * `requestTimeoutMs` and the leader's signal. A refusal is a `KubeApiError` (409: someone wrote
 * first or it exists; 404: the namespace is gone; 403: no permission). Deleting an old bundle
 * (a signer-name change) carries its uid and resourceVersion as preconditions: a bundle replaced
 * or changed since it was read is not deleted (409).
 */
import { CertificatesV1beta1Api, CoreV1Api, type KubeConfig, type V1ConfigMap, type V1beta1ClusterTrustBundle } from '@kubernetes/client-node';
import { withDeadline } from '../../core/deadline.js';
import { abortableApi, asKubeError } from '../../kube/abortable-http.js';
import type { StoredConfigMap, StoredTrustBundle } from './trust-bundle.js';

export interface TrustBundleWriter {
  createConfigMap(namespace: string, cm: StoredConfigMap, signal: AbortSignal): Promise<void>;
  replaceConfigMap(namespace: string, name: string, cm: StoredConfigMap, signal: AbortSignal): Promise<void>;
  createTrustBundle(ctb: StoredTrustBundle, signal: AbortSignal): Promise<void>;
  replaceTrustBundle(name: string, ctb: StoredTrustBundle, signal: AbortSignal): Promise<void>;
  deleteTrustBundle(name: string, precondition: { readonly uid: string; readonly resourceVersion: string }, signal: AbortSignal): Promise<void>;
}

export const PUBLISH_REQUEST_TIMEOUT_MS = 10_000;

export function kubeTrustBundleWriter(kubeConfig: KubeConfig, requestTimeoutMs = PUBLISH_REQUEST_TIMEOUT_MS): TrustBundleWriter {
  const call = async (what: string, signal: AbortSignal, fn: (s: AbortSignal) => Promise<unknown>): Promise<void> => {
    try {
      await withDeadline(requestTimeoutMs, { what, parent: signal }, fn);
    } catch (err) {
      throw asKubeError(err, what);
    }
  };
  const configMap = (cm: StoredConfigMap): V1ConfigMap => ({ apiVersion: 'v1', kind: 'ConfigMap', ...cm, metadata: { ...cm.metadata } as V1ConfigMap['metadata'] });
  const bundle = (ctb: StoredTrustBundle): V1beta1ClusterTrustBundle => ({
    apiVersion: 'certificates.k8s.io/v1beta1',
    kind: 'ClusterTrustBundle',
    metadata: { ...ctb.metadata } as V1beta1ClusterTrustBundle['metadata'],
    spec: { signerName: ctb.spec?.signerName ?? '', trustBundle: ctb.spec?.trustBundle ?? '' },
  });
  return {
    createConfigMap: (namespace, cm, signal) =>
      call(`create configmap ${namespace}/${cm.metadata?.name ?? ''}`, signal, (s) => abortableApi(kubeConfig, CoreV1Api, s).createNamespacedConfigMap({ namespace, body: configMap(cm) })),
    replaceConfigMap: (namespace, name, cm, signal) =>
      call(`update configmap ${namespace}/${name}`, signal, (s) => abortableApi(kubeConfig, CoreV1Api, s).replaceNamespacedConfigMap({ namespace, name, body: configMap(cm) })),
    createTrustBundle: (ctb, signal) =>
      call(`create clustertrustbundle ${ctb.metadata?.name ?? ''}`, signal, (s) => abortableApi(kubeConfig, CertificatesV1beta1Api, s).createClusterTrustBundle({ body: bundle(ctb) })),
    replaceTrustBundle: (name, ctb, signal) =>
      call(`update clustertrustbundle ${name}`, signal, (s) => abortableApi(kubeConfig, CertificatesV1beta1Api, s).replaceClusterTrustBundle({ name, body: bundle(ctb) })),
    deleteTrustBundle: (name, precondition, signal) =>
      call(`delete clustertrustbundle ${name}`, signal, (s) =>
        abortableApi(kubeConfig, CertificatesV1beta1Api, s).deleteClusterTrustBundle({ name, body: { preconditions: { uid: precondition.uid, resourceVersion: precondition.resourceVersion } } })),
  };
}
