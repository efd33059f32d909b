/**
 * The parts of the local stack, each started on the devcluster: the sample objects, the CA, the
 * node broker (with its own pod and least-privilege token, its three fronts: the Broker API, the
 * Workload API and the Istio CA front), the sample pods registered through the CNI socket (and
 * ztunnel's pod), and the Broker API's sample client (the consumer) subscribed to every `node-1`
 * pod. The other fronts' sample clients are stack-clients.ts.
 */
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../core/log.js';
import { Secret } from '../core/secret.js';
import type { DevCluster } from '../devcluster/index.js';
import { startCaServer, type CaServer } from '../ca/index.js';
import { startBroker, type Broker } from '../broker/broker.js';
import { BrokerClient } from '../broker/client/broker-client.js';
import { IstioCaClient } from '../broker/adapters/ca-client.js';
import { brokerRbacObjects } from '../broker/adapters/rbac.js';
import { workloadCertPem } from '../broker/cache/workload-cert.js';
import { ISTIO_CA_FRONT_DEFAULTS } from '../broker/istio-ca-front-config.js';
import { splitDerCertificates } from '../pki/x509-fields.js';
import { pushCniAddEvent } from '../cni/plugin/cni-event-client.js';
import { CNI_EVENT_SOCKET_NAME } from '../protocol/cni-event.js';
import { CA_TOKEN_AUDIENCE, DEFAULT_CLUSTER_ID } from '../protocol/istio-ca.js';
import type { SubscribeToX509SVIDResponse } from '../protocol/spiffe-broker.js';
import { emptyView, received, type SampleView } from './stack-sample-view.js';

export const TD = 'cluster.local';
export const SYSTEM_NS = 'istio-system';
export const BROKER_SA = 'certbroker-node';
export const CONSUMER_SA = 'ztunnel';
export const NODE = 'node-1';

interface SamplePod {
  readonly namespace: string;
  readonly name: string;
  readonly serviceAccount: string;
  readonly nodeName: string;
}

export const SAMPLE_PODS: readonly SamplePod[] = [
  { namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: 'node-1' },
  { namespace: 'shop', name: 'cart-1', serviceAccount: 'cart', nodeName: 'node-1' },
  { namespace: 'shop', name: 'web-0', serviceAccount: 'web', nodeName: 'node-1' },
  { namespace: 'shop', name: 'web-1', serviceAccount: 'web', nodeName: 'node-2' },
  { namespace: 'bank', name: 'ledger-0', serviceAccount: 'ledger', nodeName: 'node-1' },
  { namespace: 'bank', name: 'teller-0', serviceAccount: 'teller', nodeName: 'node-2' },
];

/** ztunnel's pod on node-1: the Istio CA front's sample client's token is bound to it. */
export const ZTUNNEL_POD: SamplePod = { namespace: SYSTEM_NS, name: 'ztunnel-node-1', serviceAccount: CONSUMER_SA, nodeName: NODE };

export function kubeConfigFor(yaml: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  return kc;
}

/** A TokenRequest token of `namespace/name` for `audience`, bound to `pod` when given. */
export async function saToken(core: CoreV1Api, namespace: string, name: string, audience: string, expirationSeconds: number, pod?: { readonly name: string; readonly uid: string }): Promise<string> {
  const boundObjectRef = pod ? { boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: pod.name, uid: pod.uid } } : {};
  const res = await core.createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [audience], expirationSeconds, ...boundObjectRef } } });
  const token = res.status?.token;
  if (!token) throw new Error(`no token for ${namespace}/${name}`);
  return token;
}

/** The namespaces, service accounts and the broker's RBAC. */
export async function applySampleObjects(dc: DevCluster): Promise<void> {
  const namespaces = [SYSTEM_NS, ...new Set(SAMPLE_PODS.map((p) => p.namespace))];
  const sas = [`${SYSTEM_NS}/${BROKER_SA}`, `${SYSTEM_NS}/${CONSUMER_SA}`, ...new Set(SAMPLE_PODS.map((p) => `${p.namespace}/${p.serviceAccount}`))];
  await dc.apply([
    ...namespaces.map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } })),
    ...sas.map((s) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: s.split('/')[0], name: s.split('/')[1] } })),
    ...brokerRbacObjects({ namespace: SYSTEM_NS, serviceAccount: BROKER_SA }),
  ]);
}

/** The CA over TLS with a self-signed root kept in the devcluster. */
export function startStackCa(admin: KubeConfig, certTtlSeconds: number, logger: Logger): Promise<CaServer> {
  return startCaServer({
    grpcHost: '127.0.0.1',
    grpcPort: 0,
    plaintext: false,
    trustDomain: TD,
    servingDnsNames: ['localhost', '127.0.0.1'],
    defaultTtlSeconds: certTtlSeconds,
    maxTtlSeconds: 90 * 86400,
    trustedNodeAccounts: [`${SYSTEM_NS}/${BROKER_SA}`],
    clusters: [{ id: DEFAULT_CLUSTER_ID, kubeConfig: admin, audiences: [CA_TOKEN_AUDIENCE], tokenReview: true }],
    defaultClusterId: DEFAULT_CLUSTER_ID,
    signer: { kind: 'self-signed', namespace: SYSTEM_NS, secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 10 * 365 * 86400 },
    tokenCacheSeconds: 60,
    signingWorkers: 1,
    shutdownGraceMs: 1000,
    logger,
  });
}

export interface StackBrokerInputs {
  readonly dc: DevCluster;
  readonly core: CoreV1Api;
  readonly ca: CaServer;
  readonly certTtlSeconds: number;
  /** Where the broker's sockets go. */
  readonly dir: string;
  readonly logger: Logger;
}

/** The node broker for `node-1`: its own pod, and an API token of its least-privilege account. */
export async function startStackBroker(i: StackBrokerInputs): Promise<Broker> {
  const brokerPod = await i.core.createNamespacedPod({
    namespace: SYSTEM_NS,
    body: {
      metadata: { name: 'certbroker-node-1', namespace: SYSTEM_NS },
      spec: { nodeName: NODE, serviceAccountName: BROKER_SA, hostNetwork: true, containers: [{ name: 'broker', image: 'certbroker' }] },
    },
  });
  const brokerApiToken = await saToken(i.core, SYSTEM_NS, BROKER_SA, i.dc.issuer, 48 * 3600);
  return startBroker({
    trustDomain: TD,
    nodeName: NODE,
    pod: { namespace: SYSTEM_NS, name: 'certbroker-node-1', uid: brokerPod.metadata!.uid!, serviceAccount: BROKER_SA },
    ca: { address: `127.0.0.1:${i.ca.port}`, rootsPem: i.ca.rootsPem(), tlsServerName: 'localhost', clusterId: DEFAULT_CLUSTER_ID, audience: CA_TOKEN_AUDIENCE, certTtlSeconds: i.certTtlSeconds },
    tokenExpirationSeconds: 3600,
    maxConcurrentFetches: 8,
    forgetGraceMs: 30_000,
    brokerSocketPath: join(i.dir, 'broker', 'broker.sock'),
    cniEventSocketPath: join(i.dir, 'broker', CNI_EVENT_SOCKET_NAME),
    workloadApiSocketPath: join(i.dir, 'workload-api', 'socket'),
    istioCaFront: { ...ISTIO_CA_FRONT_DEFAULTS, host: '127.0.0.1', port: 0 },
    allowedCallers: [`spiffe://${TD}/ns/${SYSTEM_NS}/sa/${CONSUMER_SA}`],
    updateJitterMs: 500,
    ops: { host: '127.0.0.1', port: 0 },
    shutdownGraceMs: 2000,
    kubeConfig: kubeConfigFor(i.dc.kubeconfigYaml({ token: brokerApiToken })),
    logger: i.logger,
  });
}

/** Creates the sample pods and ztunnel's; the node-1 sample pods are registered through the CNI socket as the plugin would. Returns their uids. */
export async function createSamplePods(core: CoreV1Api, broker: Broker): Promise<Map<string, string>> {
  const uids = new Map<string, string>();
  const ztunnel = await core.createNamespacedPod({
    namespace: ZTUNNEL_POD.namespace,
    body: { metadata: { name: ZTUNNEL_POD.name, namespace: ZTUNNEL_POD.namespace }, spec: { nodeName: NODE, serviceAccountName: ZTUNNEL_POD.serviceAccount, containers: [{ name: 'istio-proxy', image: 'ztunnel' }] } },
  });
  uids.set(`${ZTUNNEL_POD.namespace}/${ZTUNNEL_POD.name}`, ztunnel.metadata!.uid!);
  for (const p of SAMPLE_PODS) {
    const pod = await core.createNamespacedPod({
      namespace: p.namespace,
      body: { metadata: { name: p.name, namespace: p.namespace }, spec: { nodeName: p.nodeName, serviceAccountName: p.serviceAccount, containers: [{ name: 'app', image: 'app' }] } },
    });
    uids.set(`${p.namespace}/${p.name}`, pod.metadata!.uid!);
    if (p.nodeName === NODE) {
      await pushCniAddEvent({ Netns: `/var/run/netns/${p.name}`, PodName: p.name, PodNamespace: p.namespace, IPs: null }, { socketPath: broker.cniEventSocketPath, timeoutMs: 5000 });
    }
  }
  return uids;
}

export interface StackConsumer {
  /** What each node-1 pod's subscription received, by `namespace/name`. */
  readonly views: ReadonlyMap<string, SampleView>;
  /** Its own SVID (from the CA directly): the client certificate of its mTLS connection. */
  readonly identity: string;
  readonly notAfter: number;
  /** Cancels the subscriptions and closes the client. */
  close(): void;
}

/** The consumer: ztunnel's own SVID from the CA, then one subscription per node-1 pod. */
export async function subscribeConsumer(core: CoreV1Api, ca: CaServer, broker: Broker, uids: ReadonlyMap<string, string>, signal: AbortSignal): Promise<StackConsumer> {
  const consumerToken = new Secret(await saToken(core, SYSTEM_NS, CONSUMER_SA, CA_TOKEN_AUDIENCE, 3600));
  const caClient = new IstioCaClient({
    address: `127.0.0.1:${ca.port}`, caRootsPem: ca.rootsPem(), tlsServerName: 'localhost',
    tokens: { token: async () => consumerToken }, clusterId: DEFAULT_CLUSTER_ID, certTtlSeconds: 3600, impersonate: false,
  });
  const own = await caClient.fetchCertificate(`spiffe://${TD}/ns/${SYSTEM_NS}/sa/${CONSUMER_SA}`, signal);
  caClient.close();
  const client = new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: ca.rootsPem(), ...workloadCertPem(own), trustDomain: TD });
  const views = new Map<string, SampleView>();
  const streams: Array<{ cancel(): void }> = [];
  const close = () => {
    // The streams are cancelled before the client closes.
    for (const s of streams.reverse()) s.cancel();
    client.close();
  };
  try {
    subscribeAll(client, uids, views, streams);
  } catch (err) {
    close();
    throw err;
  }
  return { views, close, identity: own.identity, notAfter: own.notAfter };
}

function subscribeAll(client: BrokerClient, uids: ReadonlyMap<string, string>, views: Map<string, SampleView>, streams: Array<{ cancel(): void }>): void {
  for (const p of SAMPLE_PODS.filter((x) => x.nodeName === NODE)) {
    const key = `${p.namespace}/${p.name}`;
    const view = emptyView();
    views.set(key, view);
    const stream = client.subscribeX509Svid({ uid: uids.get(key)! });
    stream.on('data', (m: SubscribeToX509SVIDResponse) => {
      const leaf = new X509Certificate(splitDerCertificates(m.svids[0]!.x509_svid)[0]!);
      received(view, leaf.serialNumber.toLowerCase(), Date.parse(leaf.validTo), Date.now());
    });
    stream.on('error', (e: { details?: string }) => (view.problem = `ended: ${e.details ?? 'error'}`));
    streams.push(stream);
  }
}
