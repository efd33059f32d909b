/**
 * Pods through the informer: all namespaces or one, usually narrowed with a field selector
 * (`spec.nodeName=<node>` for the broker and repair). The CA indexes the cache by (ns, sa, node).
 */
import type { V1Pod } from '@kubernetes/client-node';
import { Informer, type InformerOptions } from './informer.js';

export type PodInformerOptions = Omit<InformerOptions<V1Pod>, 'path'> & {
  /** Only this namespace (default: all namespaces). */
  readonly namespace?: string;
};

export type PodInformer = Informer<V1Pod>;

export function createPodInformer(options: PodInformerOptions): PodInformer {
  const ns = options.namespace;
  return new Informer<V1Pod>({
    resource: 'pods',
    ...options,
    path: ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/pods` : '/api/v1/pods',
  });
}
