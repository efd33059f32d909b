/**
 * `certbroker start --signer kubernetes-csr`: the stack's CA on the Kubernetes CSR API, signed by
 * `certbroker k8s-signer`. A plug-in CA (root -> intermediate) is made for the run and written as
 * a cacerts directory for the k8s-signer; the CA keeps only its root. Both run as their own
 * service accounts with the RBAC of deploy/ + components/kubernetes-csr (csrStackRbacObjects,
 * checked against those manifests by test/deploy/stack-csr-rbac.test.ts).
 */
import { join } from 'node:path';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from '../core/log.js';
import type { DevCluster } from '../devcluster/index.js';
import { startCaServer, type CaServer } from '../ca/index.js';
import { readK8sSignerConfig, startK8sSigner, type K8sSigner } from '../k8s-signer/index.js';
import { makePluginCaBundle, writeCaCertsDir } from '../pki/index.js';
import { CA_TOKEN_AUDIENCE, DEFAULT_CLUSTER_ID, ROOT_CERT_CONFIGMAP } from '../protocol/istio-ca.js';
import { BROKER_SA, kubeConfigFor, SYSTEM_NS, TD } from './stack-parts.js';

export const STACK_SIGNER_NAME = 'certbroker.io/spiffe';
const CA_SA = 'certbroker-ca';
const SIGNER_SA = 'certbroker-k8s-signer';

const GROUP = 'certificates.k8s.io';
type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

function clusterRole(name: string, sa: string, rules: Rule[]): object[] {
  return [
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace: SYSTEM_NS }],
    },
  ];
}

/** The CA's and the k8s-signer's accounts and cluster roles (the stack needs no Secret access: the CA keeps no root of its own here). */
export function csrStackRbacObjects(signerName = STACK_SIGNER_NAME): object[] {
  return [
    ...[CA_SA, SIGNER_SA].map((name) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: SYSTEM_NS } })),
    ...clusterRole('certbroker-ca', CA_SA, [
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
      // Trust-bundle publication (deploy/rbac-ca.yaml), granted as shipped.
      { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['configmaps'], resourceNames: [ROOT_CERT_CONFIGMAP], verbs: ['get', 'list', 'watch', 'update'] },
      { apiGroups: [''], resources: ['configmaps'], verbs: ['create'] },
      { apiGroups: [GROUP], resources: ['clustertrustbundles'], resourceNames: ['istio.io:istiod-ca:root-cert'], verbs: ['get', 'update'] },
      { apiGroups: [GROUP], resources: ['clustertrustbundles'], verbs: ['create', 'list', 'watch', 'delete'] },
      { apiGroups: [GROUP], resources: ['signers'], resourceNames: ['istio.io/istiod-ca'], verbs: ['attest'] },
    ]),
    ...clusterRole('certbroker-ca-csr', CA_SA, [{ apiGroups: [GROUP], resources: ['certificatesigningrequests'], verbs: ['create', 'get', 'list', 'watch', 'delete'] }]),
    ...clusterRole('certbroker-ca-csr-approver', CA_SA, [
      { apiGroups: [GROUP], resources: ['certificatesigningrequests/approval'], verbs: ['update'] },
      { apiGroups: [GROUP], resources: ['signers'], resourceNames: [signerName], verbs: ['approve'] },
    ]),
    ...clusterRole('certbroker-k8s-signer', SIGNER_SA, [
      { apiGroups: [GROUP], resources: ['certificatesigningrequests'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [GROUP], resources: ['certificatesigningrequests/status'], verbs: ['update'] },
      { apiGroups: [GROUP], resources: ['signers'], resourceNames: [signerName], verbs: ['sign'] },
    ]),
  ];
}

async function kubeConfigOf(dc: DevCluster, core: CoreV1Api, sa: string) {
  const res = await core.createNamespacedServiceAccountToken({ name: sa, namespace: SYSTEM_NS, body: { spec: { audiences: [dc.issuer], expirationSeconds: 48 * 3600 } } });
  const token = res.status?.token;
  if (!token) throw new Error(`no token for ${SYSTEM_NS}/${sa}`);
  return kubeConfigFor(dc.kubeconfigYaml({ token }));
}

export interface CsrStack {
  readonly ca: CaServer;
  readonly signer: K8sSigner;
}

/** The k8s-signer, then the CA on the CSR backend (its serving certificate comes through the CSR API too). */
export async function startCsrStack(i: { dc: DevCluster; core: CoreV1Api; dir: string; certTtlSeconds: number; logger: Logger }): Promise<CsrStack> {
  await i.dc.apply(csrStackRbacObjects());
  const bundle = await makePluginCaBundle({ rootSubject: 'O=certbroker-start, CN=Stack Root', caSubject: 'O=certbroker-start, CN=Stack k8s-signer CA', rootTtlSeconds: 10 * 365 * 86400, caTtlSeconds: 365 * 86400, keyType: 'ec-p256', nowMs: Date.now() });
  const cacertsDir = join(i.dir, 'cacerts');
  await writeCaCertsDir(cacertsDir, bundle);
  const signer = await startK8sSigner({
    config: readK8sSignerConfig({ signerName: STACK_SIGNER_NAME, trustDomain: TD, cacertsDir, opsAddress: '127.0.0.1:0' }, {}),
    kubeConfig: await kubeConfigOf(i.dc, i.core, SIGNER_SA),
    logger: i.logger,
  });
  try {
    const ca = await startCaServer({
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      plaintext: false,
      trustDomain: TD,
      servingDnsNames: ['localhost', '127.0.0.1'],
      defaultTtlSeconds: i.certTtlSeconds,
      maxTtlSeconds: 90 * 86400,
      trustedNodeAccounts: [`${SYSTEM_NS}/${BROKER_SA}`],
      clusters: [{ id: DEFAULT_CLUSTER_ID, kubeConfig: await kubeConfigOf(i.dc, i.core, CA_SA), audiences: [CA_TOKEN_AUDIENCE], tokenReview: true }],
      defaultClusterId: DEFAULT_CLUSTER_ID,
      signer: { kind: 'kubernetes-csr', signerName: STACK_SIGNER_NAME, autoApprove: true, rootsPem: bundle.rootCertPem },
      tokenCacheSeconds: 60,
      signingWorkers: 0,
      shutdownGraceMs: 1000,
      logger: i.logger,
    });
    return { ca, signer };
  } catch (err) {
    await signer.stop();
    throw err;
  }
}
