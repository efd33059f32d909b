/** Kubeconfig text for a devcluster user: one cluster (our CA inlined), one user (a token), one context. */
import { renderKubeconfigFile } from '../core/kubeconfig-file.js';
import { Secret } from '../core/secret.js';

export interface KubeconfigOptions {
  readonly server: string;
  readonly caCertPem: string;
  readonly token: string;
  readonly userName?: string;
  readonly clusterName?: string;
  readonly namespace?: string;
}

export function kubeconfigYaml(o: KubeconfigOptions): string {
  const cluster = o.clusterName ?? 'devcluster';
  return renderKubeconfigFile({
    server: o.server,
    caPem: o.caCertPem,
    token: new Secret(o.token),
    clusterName: cluster,
    userName: o.userName ?? 'devcluster-user',
    contextName: cluster,
    ...(o.namespace ? { namespace: o.namespace } : {}),
  });
}
