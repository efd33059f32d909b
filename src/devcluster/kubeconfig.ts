/** Kubeconfig text for a devcluster user: one cluster (our CA inlined), one user (a token), one context. */
import { stringify } from 'yaml';

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
  const user = o.userName ?? 'devcluster-user';
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: cluster, cluster: { server: o.server, 'certificate-authority-data': Buffer.from(o.caCertPem).toString('base64') } }],
    users: [{ name: user, user: { token: o.token } }],
    contexts: [{ name: cluster, context: { cluster, user, ...(o.namespace ? { namespace: o.namespace } : {}) } }],
    'current-context': cluster,
    preferences: {},
  });
}
