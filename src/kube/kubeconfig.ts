/**
 * Loading a KubeConfig the way our components run: an explicit kubeconfig file (install-cni
 * writes one for the plugin; the devcluster writes one for local runs), the in-cluster service
 * account (token + CA under /var/run/secrets/kubernetes.io/serviceaccount and
 * KUBERNETES_SERVICE_HOST/PORT), or client-node's default chain ($KUBECONFIG, ~/.kube/config).
 * A config without a usable cluster is an error now, not a confusing failure at the first request.
 */
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeError } from './errors.js';

export interface LoadKubeConfigOptions {
  readonly kubeconfigPath?: string;
  readonly inCluster?: boolean;
  /** Prefix for the in-cluster service-account directory (tests point this at a temp dir). */
  readonly inClusterRoot?: string;
}

export const IN_CLUSTER_SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export function loadKubeConfig(options: LoadKubeConfigOptions = {}): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (options.kubeconfigPath) {
      if (!existsSync(options.kubeconfigPath)) {
        throw new KubeError('ERR_KUBE_CONFIG_INVALID', `kubeconfig ${options.kubeconfigPath} does not exist`, { status: 'invalid-argument' });
      }
      kc.loadFromFile(options.kubeconfigPath);
    } else if (options.inCluster) {
      const root = options.inClusterRoot ?? '';
      if (!existsSync(`${root}${IN_CLUSTER_SA_DIR}/token`)) {
        throw new KubeError('ERR_KUBE_CONFIG_INVALID', `in-cluster config: no service-account token at ${root}${IN_CLUSTER_SA_DIR}/token`, { status: 'invalid-argument' });
      }
      if (!process.env.KUBERNETES_SERVICE_HOST) {
        throw new KubeError('ERR_KUBE_CONFIG_INVALID', 'in-cluster config: KUBERNETES_SERVICE_HOST is not set', { status: 'invalid-argument' });
      }
      kc.loadFromCluster(root || undefined);
    } else {
      kc.loadFromDefault();
    }
  } catch (err) {
    if (err instanceof KubeError) throw err;
    throw new KubeError('ERR_KUBE_CONFIG_INVALID', `cannot load kubeconfig: ${err instanceof Error ? err.message : String(err)}`, { status: 'invalid-argument', cause: err });
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster || !cluster.server) {
    throw new KubeError('ERR_KUBE_CONFIG_INVALID', 'kubeconfig has no current cluster with a server URL', { status: 'invalid-argument' });
  }
  return kc;
}
