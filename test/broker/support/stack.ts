/**
 * The real parts the broker's end-to-end tests run against: the devcluster over HTTPS (RBAC
 * enforced for the broker), the certbroker CA over TLS (TokenReview + node authorization), and
 * helpers to create pods and tokens and to obtain a consumer SVID from the CA.
 */
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { startCaServer, type CaLimits, type CaServer, type SignerConfig } from '../../../src/ca/index.js';
import { silentLogger, type Logger } from '../../../src/core/log.js';
import { Secret } from '../../../src/core/secret.js';
import { startDevCluster, type DevCluster } from '../../../src/devcluster/index.js';
import { type BrokerConfig, brokerRbacObjects, IstioCaClient, type IstioCaClientOptions, workloadCertPem } from '../../../src/broker/index.js';
import type { Clock } from '../../../src/core/clock.js';
import { tempDirSync } from '../../support/scratch.js';
import type { InformerSettings } from '../../../src/kube/index.js';

export const TD = 'cluster.local';
export const BROKER_NS = 'istio-system';
export const BROKER_SA = 'certbroker-node';
export const CONSUMER_SA = 'ztunnel';
export const NODE = 'node-1';

export interface PodSpec {
  readonly namespace: string;
  readonly name: string;
  readonly serviceAccount: string;
  readonly nodeName: string;
  readonly hostNetwork?: boolean;
}

export interface StackOptions {
  readonly tmpPrefix: string;
  readonly namespaces: readonly string[];
  readonly serviceAccounts: readonly string[];
  readonly bookmarkIntervalMs?: number;
  /** The CA's clock and signer (default: real time, self-signed in istio-system/istio-ca-secret). */
  readonly ca?: CaOptions;
}

export interface CaOptions {
  readonly clock?: Clock;
  readonly signer?: SignerConfig;
  /** Serving names the CA may grant (CA_GRANTABLE_SERVING_NAMES; default the CA's). */
  readonly grantableServingNames?: readonly string[];
  /** The CA's transport limits (CA_MAX_STREAMS and the like; default the CA's). */
  readonly limits?: Partial<CaLimits>;
}

export interface Svid {
  readonly identity: string;
  readonly certChainPem: string;
  readonly privateKeyPem: Secret<string>;
  readonly serial: string;
}

export class Stack {
  readonly dc: DevCluster;
  readonly admin: KubeConfig;
  readonly core: CoreV1Api;
  ca: CaServer;
  readonly caPort: number;
  readonly brokerPod: { namespace: string; name: string; uid: string; serviceAccount: string };
  readonly brokerKubeConfig: KubeConfig;
  readonly dir: string;

  private constructor(init: {
    dc: DevCluster;
    admin: KubeConfig;
    ca: CaServer;
    brokerPod: Stack['brokerPod'];
    brokerKubeConfig: KubeConfig;
    dir: string;
  }) {
    this.dc = init.dc;
    this.admin = init.admin;
    this.core = init.admin.makeApiClient(CoreV1Api);
    this.ca = init.ca;
    this.caPort = init.ca.port;
    this.brokerPod = init.brokerPod;
    this.brokerKubeConfig = init.brokerKubeConfig;
    this.dir = init.dir;
  }

  /**
   * Starts the stack in a fresh temporary directory (`tmpPrefix`…), which `close()` removes. The
   * brokers' sockets go there; tests put their own files in `dir` too.
   */
  static async start(options: StackOptions): Promise<Stack> {
    const dir = tempDirSync(options.tmpPrefix);
    try {
      return await Stack.#startIn(dir, options);
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  static async #startIn(dir: string, options: Omit<StackOptions, 'tmpPrefix'>): Promise<Stack> {
    const dc = await startDevCluster({ simulateKubelet: true, ...(options.bookmarkIntervalMs !== undefined ? { bookmarkIntervalMs: options.bookmarkIntervalMs } : {}) });
    const admin = kubeConfigFor(dc, dc.adminToken);
    const core = admin.makeApiClient(CoreV1Api);
    await dc.apply([
      ...[BROKER_NS, ...options.namespaces].map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } })),
      ...[`${BROKER_NS}/${BROKER_SA}`, `${BROKER_NS}/${CONSUMER_SA}`, ...options.serviceAccounts].map((nsSa) => {
        const [namespace, name] = nsSa.split('/');
        return { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace, name } };
      }),
      ...brokerRbacObjects({ namespace: BROKER_NS, serviceAccount: BROKER_SA }),
    ]);
    const brokerPodName = 'certbroker-node-x7k2p';
    const created = await core.createNamespacedPod({
      namespace: BROKER_NS,
      body: {
        metadata: { name: brokerPodName, namespace: BROKER_NS },
        spec: { nodeName: NODE, serviceAccountName: BROKER_SA, containers: [{ name: 'broker', image: 'certbroker' }] },
      },
    });
    const brokerPod = { namespace: BROKER_NS, name: brokerPodName, uid: created.metadata!.uid!, serviceAccount: BROKER_SA };
    // The broker's own API credentials: a token for its service account (as the kubelet would mount).
    const apiToken = await tokenFor(core, BROKER_NS, BROKER_SA, { audience: dc.issuer, expirationSeconds: 48 * 3600 });
    const brokerKubeConfig = kubeConfigFor(dc, apiToken.reveal());
    const ca = await startCa(dc, admin, 0, options.ca);
    return new Stack({ dc, admin, ca, brokerPod, brokerKubeConfig, dir });
  }

  brokerConfig(options: { clock?: Clock; logger?: Logger; certTtlSeconds?: number; forgetGraceMs?: number; name?: string; informer?: InformerSettings }): BrokerConfig {
    const name = options.name ?? 'broker';
    return {
      trustDomain: TD,
      nodeName: NODE,
      pod: this.brokerPod,
      ca: {
        address: `127.0.0.1:${this.caPort}`,
        rootsPem: this.ca.rootsPem(),
        tlsServerName: 'localhost',
        clusterId: 'Kubernetes',
        audience: 'istio-ca',
        certTtlSeconds: options.certTtlSeconds ?? 3600,
      },
      tokenExpirationSeconds: 3600,
      maxConcurrentFetches: 8,
      forgetGraceMs: options.forgetGraceMs ?? 30_000,
      brokerSocketPath: `${this.dir}/${name}/broker.sock`,
      cniEventSocketPath: `${this.dir}/${name}/pluginevent.sock`,
      allowedCallers: [`spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`],
      updateJitterMs: 20,
      ops: { host: '127.0.0.1', port: 0 },
      shutdownGraceMs: 2000,
      kubeConfig: this.brokerKubeConfig,
      logger: options.logger ?? silentLogger,
      ...(options.clock ? { clock: options.clock } : {}),
      ...(options.informer ? { informer: options.informer } : {}),
    };
  }

  /**
   * The environment `certbroker broker` runs from as a process (as the DaemonSet sets it), for this
   * stack's broker pod: its kubeconfig (the broker's API token) and the stack CA's root written
   * under the stack's dir (`rootFile` instead when given), the CA at `caAddress` (default: the
   * stack's), both sockets under `<dir>/<name>/`, ops off. Callers add PATH, LOG_LEVEL and the rest.
   */
  async brokerEnv(
    name: string,
    options: { readonly caAddress?: string; readonly rootFile?: string } = {},
  ): Promise<{ env: Record<string, string>; rootFile: string; brokerSocket: string; cniSocket: string }> {
    const kubeconfig = join(this.dir, `${name}.kubeconfig`);
    await this.dc.writeKubeconfig(kubeconfig, { token: this.brokerKubeConfig.getCurrentUser()!.token!, name: 'broker' });
    let rootFile = options.rootFile;
    if (rootFile === undefined) {
      rootFile = join(this.dir, `${name}-ca-root.pem`);
      await writeFile(rootFile, this.ca.rootsPem());
    }
    const brokerSocket = join(this.dir, name, 'broker.sock');
    const cniSocket = join(this.dir, name, 'pluginevent.sock');
    const env = {
      NODE_NAME: NODE,
      POD_NAME: this.brokerPod.name,
      POD_NAMESPACE: this.brokerPod.namespace,
      POD_UID: this.brokerPod.uid,
      SERVICE_ACCOUNT: this.brokerPod.serviceAccount,
      TRUST_DOMAIN: TD,
      CA_ADDRESS: options.caAddress ?? `127.0.0.1:${this.caPort}`,
      CA_TLS_SERVER_NAME: 'localhost',
      CA_ROOT_CERT_FILE: rootFile,
      KUBECONFIG: kubeconfig,
      SPIFFE_BROKER_SOCKET: `unix://${brokerSocket}`,
      CNI_EVENT_SOCKET: cniSocket,
      BROKER_OPS_ADDRESS: 'off',
    };
    return { env, rootFile, brokerSocket, cniSocket };
  }

  async createPod(spec: PodSpec): Promise<string> {
    const pod = await this.core.createNamespacedPod({
      namespace: spec.namespace,
      body: {
        metadata: { name: spec.name, namespace: spec.namespace },
        spec: {
          nodeName: spec.nodeName,
          serviceAccountName: spec.serviceAccount,
          hostNetwork: spec.hostNetwork ?? false,
          containers: [{ name: 'app', image: 'app' }],
        },
      },
    });
    return pod.metadata!.uid!;
  }

  async deletePod(namespace: string, name: string): Promise<void> {
    await this.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
  }

  /** A TokenRequest token of `serviceAccount` bound to its pod `pod` (as the kubelet projects one). */
  async podToken(namespace: string, serviceAccount: string, pod: string, audience = 'istio-ca'): Promise<Secret<string>> {
    const uid = (await this.core.readNamespacedPod({ namespace, name: pod })).metadata?.uid;
    const res = await this.core.createNamespacedServiceAccountToken({
      name: serviceAccount,
      namespace,
      body: { spec: { audiences: [audience], expirationSeconds: 3600, boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: pod, ...(uid ? { uid } : {}) } } },
    });
    return new Secret(res.status!.token);
  }

  /** A CA client for the identity `token` is for (no impersonation), to the stack's CA unless `address` says otherwise. */
  caClientOptions(token: Secret<string>, address = `127.0.0.1:${this.caPort}`): IstioCaClientOptions {
    return {
      address,
      caRootsPem: this.ca.rootsPem(),
      tlsServerName: 'localhost',
      tokens: { token: async () => token },
      clusterId: 'Kubernetes',
      certTtlSeconds: 3600,
      impersonate: false,
    };
  }

  /** An SVID for a service account's own identity, straight from the CA (no impersonation). */
  async ownSvid(namespace: string, serviceAccount: string): Promise<Svid> {
    const token = await tokenFor(this.core, namespace, serviceAccount, { audience: 'istio-ca', expirationSeconds: 3600 });
    const client = new IstioCaClient(this.caClientOptions(token));
    try {
      const identity = `spiffe://${TD}/ns/${namespace}/sa/${serviceAccount}`;
      const cert = await client.fetchCertificate(identity, new AbortController().signal);
      return {
        identity,
        ...workloadCertPem(cert),
        serial: cert.serial,
      };
    } finally {
      client.close();
    }
  }

  async stopCa(): Promise<void> {
    await this.ca.stop();
  }

  /** Starts the CA again on the same port; the self-signed root persists in istio-ca-secret. */
  async restartCa(): Promise<void> {
    this.ca = await startCa(this.dc, this.admin, this.caPort);
  }

  async close(): Promise<void> {
    try {
      await this.ca.stop().catch(() => undefined);
      await this.dc.close();
    } finally {
      await rm(this.dir, { recursive: true, force: true });
    }
  }
}

export function kubeConfigFor(dc: DevCluster, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(dc.kubeconfigYaml({ token }));
  return kc;
}

export async function tokenFor(
  core: CoreV1Api,
  namespace: string,
  serviceAccount: string,
  options: { audience: string; expirationSeconds: number },
): Promise<Secret<string>> {
  const res = await core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace,
    body: { spec: { audiences: [options.audience], expirationSeconds: options.expirationSeconds } },
  });
  return new Secret(res.status!.token);
}

async function startCa(dc: DevCluster, admin: KubeConfig, port: number, options: CaOptions = {}): Promise<CaServer> {
  const ca = await startCaServer({
    grpcHost: '127.0.0.1',
    grpcPort: port,
    plaintext: false,
    trustDomain: TD,
    servingDnsNames: ['localhost', '127.0.0.1'],
    defaultTtlSeconds: 3600,
    maxTtlSeconds: 90 * 86400,
    trustedNodeAccounts: [`${BROKER_NS}/${BROKER_SA}`],
    clusters: [{ id: 'Kubernetes', kubeConfig: admin, audiences: ['istio-ca'], tokenReview: true }],
    defaultClusterId: 'Kubernetes',
    signer: options.signer ?? { kind: 'self-signed', namespace: BROKER_NS, secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 10 * 365 * 86400 },
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.grantableServingNames ? { grantableServingNames: options.grantableServingNames } : {}),
    ...(options.limits ? { limits: options.limits } : {}),
    tokenCacheSeconds: 60,
    signingWorkers: 1,
    shutdownGraceMs: 500,
    logger: silentLogger,
  });
  for (let i = 0; i < 200 && !ca.ready; i++) await new Promise((r) => setTimeout(r, 25));
  if (!ca.ready) throw new Error('CA did not become ready');
  return ca;
}
