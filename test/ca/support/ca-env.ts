/**
 * A real CA against a real devcluster (HTTPS, RBAC enforced) for the CA's end-to-end tests:
 * the CA runs as its own service account with least-privilege RBAC; tokens are minted through
 * TokenRequest; pods are created and deleted through the API; calls go over gRPC+TLS.
 */
import { request } from 'node:http';
import { credentials, Metadata, type ChannelCredentials, type Client, type ServiceError } from '@grpc/grpc-js';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../../src/core/clock.js';
import { createLogger, type Logger } from '../../../src/core/log.js';
import { startDevCluster, type DevCluster } from '../../../src/devcluster/index.js';
import { startCaServer, type CaServer, type CaServerConfig, type ClusterConfig } from '../../../src/ca/index.js';
import { loadProtos, lookup, stringStruct } from '../../../src/grpc/index.js';

export const TD = 'cluster.local';
export const CA_NAMESPACE = 'istio-system';
export const CA_SA = 'certbroker-ca';

/** What the CA needs from the apiserver, and nothing more. */
export function caRbacObjects(namespace = CA_NAMESPACE, sa = CA_SA): object[] {
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa, namespace } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'certbroker-ca' },
      rules: [
        { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
        { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'certbroker-ca' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'certbroker-ca' },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'certbroker-ca', namespace },
      rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'certbroker-ca', namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'certbroker-ca' },
      subjects: [{ kind: 'ServiceAccount', name: sa, namespace }],
    },
  ];
}

export interface PodSpec {
  readonly namespace: string;
  readonly name: string;
  readonly serviceAccount: string;
  readonly node: string;
}

export interface CertResult {
  readonly chain?: readonly string[];
  readonly code?: number;
  readonly details?: string;
  readonly errorCode?: string;
}

export interface CaEnv {
  readonly cluster: DevCluster;
  readonly admin: KubeConfig;
  readonly core: CoreV1Api;
  /** Kubeconfig of the CA's own service account. */
  readonly caKubeConfig: KubeConfig;
  readonly logs: string[];
  readonly logger: Logger;
  ensureNamespace(name: string): Promise<void>;
  ensureServiceAccount(namespace: string, name: string): Promise<void>;
  createPod(p: PodSpec): Promise<{ uid: string }>;
  deletePod(namespace: string, name: string): Promise<void>;
  /** A TokenRequest token (audience istio-ca by default), bound to `pod` when given. */
  token(o: { namespace: string; serviceAccount: string; pod?: string; audiences?: string[]; expirationSeconds?: number }): Promise<string>;
  clusterConfig(id?: string, extra?: Partial<ClusterConfig>): ClusterConfig;
  startCa(overrides?: Partial<CaServerConfig>): Promise<CaServer>;
  close(): Promise<void>;
}

async function kubeConfigFor(cluster: DevCluster, token: string): Promise<KubeConfig> {
  const kc = new KubeConfig();
  kc.loadFromString(cluster.kubeconfigYaml({ token }));
  return kc;
}

export async function startCaEnv(options: { readonly clusterClock?: Clock; readonly bookmarkIntervalMs?: number } = {}): Promise<CaEnv> {
  const cluster = await startDevCluster({
    ...(options.clusterClock ? { clock: options.clusterClock } : {}),
    ...(options.bookmarkIntervalMs !== undefined ? { bookmarkIntervalMs: options.bookmarkIntervalMs } : {}),
  });
  const admin = await kubeConfigFor(cluster, cluster.adminToken);
  const core = admin.makeApiClient(CoreV1Api);
  const logs: string[] = [];
  const logger = createLogger({ level: 'debug', sink: (l) => logs.push(l) });
  const cas: CaServer[] = [];

  const ensureNamespace = async (name: string) => {
    await cluster.apply([{ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }]);
  };
  const ensureServiceAccount = async (namespace: string, name: string) => {
    await ensureNamespace(namespace);
    await cluster.apply([{ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } }]);
  };
  const token: CaEnv['token'] = async (o) => {
    let uid: string | undefined;
    if (o.pod) uid = (await core.readNamespacedPod({ namespace: o.namespace, name: o.pod })).metadata?.uid;
    const tr = await core.createNamespacedServiceAccountToken({
      namespace: o.namespace,
      name: o.serviceAccount,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          audiences: o.audiences ?? ['istio-ca'],
          expirationSeconds: o.expirationSeconds ?? 3600,
          ...(o.pod ? { boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: o.pod, ...(uid ? { uid } : {}) } } : {}),
        },
      },
    });
    const t = tr.status?.token;
    if (!t) throw new Error('TokenRequest returned no token');
    return t;
  };

  await ensureNamespace(CA_NAMESPACE);
  await cluster.apply(caRbacObjects());
  for (const node of ['node-a', 'node-b']) await cluster.apply([{ apiVersion: 'v1', kind: 'Node', metadata: { name: node } }]);
  const caToken = await token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [cluster.issuer], expirationSeconds: 48 * 3600 });
  const caKubeConfig = await kubeConfigFor(cluster, caToken);

  const clusterConfig: CaEnv['clusterConfig'] = (id = 'Kubernetes', extra = {}) => ({
    id,
    kubeConfig: caKubeConfig,
    audiences: ['istio-ca'],
    tokenReview: true,
    ...extra,
  });

  return {
    cluster,
    admin,
    core,
    caKubeConfig,
    logs,
    logger,
    ensureNamespace,
    ensureServiceAccount,
    async createPod(p) {
      await ensureServiceAccount(p.namespace, p.serviceAccount);
      const created = await core.createNamespacedPod({
        namespace: p.namespace,
        body: {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: p.name, namespace: p.namespace },
          spec: { serviceAccountName: p.serviceAccount, nodeName: p.node, containers: [{ name: 'app', image: 'example.invalid/app:1' }] },
        },
      });
      return { uid: created.metadata?.uid ?? '' };
    },
    async deletePod(namespace, name) {
      await core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
    },
    token,
    clusterConfig,
    async startCa(overrides = {}) {
      const ca = await startCaServer({
        grpcHost: '127.0.0.1',
        grpcPort: 0,
        plaintext: false,
        trustDomain: TD,
        servingDnsNames: ['localhost', '127.0.0.1'],
        defaultTtlSeconds: 86_400,
        maxTtlSeconds: 7 * 86_400,
        trustedNodeAccounts: ['istio-system/ztunnel'],
        clusters: [clusterConfig()],
        defaultClusterId: 'Kubernetes',
        signer: { kind: 'self-signed', namespace: CA_NAMESPACE, secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 10 * 365 * 86_400 },
        tokenCacheSeconds: 60,
        signingWorkers: 0,
        shutdownGraceMs: 2000,
        logger,
        ...overrides,
      });
      cas.push(ca);
      return ca;
    },
    async close() {
      await Promise.all(cas.map((c) => c.stop()));
      await cluster.close();
    },
  };
}

type CreateCertificate = (
  req: unknown,
  md: Metadata,
  options: { deadline?: number },
  cb: (err: ServiceError | null, res?: { cert_chain: string[] }) => void,
) => void;

export interface CaClient {
  /** `headers`: extra request metadata; `deadlineMs`: the call's deadline (none by default). */
  create(o: { token?: string; csr: string; ttlSeconds?: number; impersonate?: string; clusterId?: string; metadata?: Record<string, string>; headers?: Record<string, string>; deadlineMs?: number }): Promise<CertResult>;
  close(): void;
}

/** A grpc-js client of IstioCertificateService, over TLS trusting `rootsPem` (or plaintext). */
export function caClient(port: number, rootsPem: string | undefined): CaClient {
  const { grpcObject } = loadProtos(['istio/v1/auth/ca.proto']);
  const Ctor = lookup<new (addr: string, creds: ChannelCredentials, options?: Record<string, string>) => Client & { CreateCertificate: CreateCertificate }>(
    grpcObject,
    'istio.v1.auth.IstioCertificateService',
  );
  const creds = rootsPem === undefined ? credentials.createInsecure() : credentials.createSsl(Buffer.from(rootsPem));
  // The serving certificate carries an IP SAN too; the override only avoids an IP as TLS SNI.
  const client = new Ctor(`127.0.0.1:${port}`, creds, { 'grpc.ssl_target_name_override': 'localhost' });
  return {
    create(o) {
      const md = new Metadata();
      if (o.token !== undefined) md.set('authorization', `Bearer ${o.token}`);
      if (o.clusterId !== undefined) md.set('clusterid', o.clusterId);
      for (const [k, v] of Object.entries(o.headers ?? {})) md.set(k, v);
      const fields: Record<string, string> = { ...(o.metadata ?? {}) };
      if (o.impersonate !== undefined) fields.ImpersonatedIdentity = o.impersonate;
      const req = { csr: o.csr, validity_duration: o.ttlSeconds ?? 0, ...(Object.keys(fields).length ? { metadata: stringStruct(fields) } : {}) };
      return new Promise((resolve) => {
        const callOptions = o.deadlineMs === undefined ? {} : { deadline: Date.now() + o.deadlineMs };
        client.CreateCertificate(req, md, callOptions, (err, res) => {
          if (err) {
            const ec = err.metadata?.get('certbroker-error-code')[0];
            resolve({ code: err.code, details: err.details, ...(typeof ec === 'string' ? { errorCode: ec } : {}) });
          } else resolve({ chain: res?.cert_chain ?? [] });
        });
      });
    },
    close: () => client.close(),
  };
}

/** The `reason` of the last "CreateCertificate denied/failed" log line (the precise cause). */
export function lastDenialReason(logs: readonly string[]): string | undefined {
  for (let i = logs.length - 1; i >= 0; i--) {
    const rec = JSON.parse(logs[i]!) as { msg?: string; reason?: string };
    if (rec.msg === 'CreateCertificate denied' || rec.msg === 'CreateCertificate failed') return rec.reason;
  }
  return undefined;
}

/** Resolves once the CA's pod index satisfies `pred` (the informer is eventually consistent). */
export async function waitForIndex(ca: CaServer, pred: (idx: NonNullable<ReturnType<CaServer['podIndex']>>) => boolean, clusterId = 'Kubernetes'): Promise<void> {
  const idx = ca.podIndex(clusterId);
  if (!idx) throw new Error(`no pod index for ${clusterId}`);
  for (let i = 0; i < 2000; i++) {
    if (idx.synced && pred(idx)) return;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error('pod index did not reach the expected state');
}

export interface NodeAScenario {
  readonly env: CaEnv;
  readonly ca: CaServer;
  /** A ztunnel token bound to istio-system/ztunnel-a. */
  readonly ztunnel: string;
}

/**
 * A CA env with istio-system/ztunnel-a and default/sleep-a on node-a, a CA started with
 * `overrides` whose pod index already holds sleep-a, and a ztunnel token. Closes the env if
 * any step fails.
 */
export async function startNodeAScenario(overrides: Partial<CaServerConfig> = {}): Promise<NodeAScenario> {
  const env = await startCaEnv();
  try {
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    const ca = await env.startCa(overrides);
    await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
    const ztunnel = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
    return { env, ca, ztunnel };
  } catch (err) {
    await env.close();
    throw err;
  }
}

/** TokenReviews the devcluster has been sent so far (from its request log): what authentication cost the API server. */
export function tokenReviews(env: CaEnv): number {
  return env.cluster.requestLog.entries({ method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews' }).length;
}

/** A plain HTTP GET on loopback (the CA's ops endpoint: /ready, /metrics). */
export function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on('error', reject)
      .end();
  });
}
