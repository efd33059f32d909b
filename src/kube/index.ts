/** Kubernetes adapters shared by the CA, the broker and install-cni (on @kubernetes/client-node). */
export { loadKubeConfig, IN_CLUSTER_SA_DIR } from './kubeconfig.js';
export type { LoadKubeConfigOptions } from './kubeconfig.js';
export { Informer } from './informer.js';
export type { InformerOptions, InformerHandlers, ListResult, Selectors } from './informer.js';
export { createPodInformer } from './pod-informer.js';
export type { PodInformer, PodInformerOptions } from './pod-informer.js';
export { KubeError } from './errors.js';
export type { KubeErrorCode } from './errors.js';
