/**
 * The real node broker for the ambient end-to-end test and the CNI benchmark: the certbroker CA
 * (TLS, TokenReview, node authorization) and `startBroker` on one devcluster node, with the
 * broker's CNI registration socket at `<cni_agent_run_dir>/pluginevent.sock`, where the plugin
 * looks for it. Log lines are kept so a test can see what the broker did.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { join } from 'node:path';
import { type Broker, brokerRbacObjects, startBroker } from '../../../src/broker/index.js';
import { startCaServer, type CaServer } from '../../../src/ca/index.js';
import { createLogger, silentLogger } from '../../../src/core/log.js';
import { setTimeout as delay } from 'node:timers/promises';
import { CNI_NAMESPACE, adminRequest, type PluginCluster } from './fixture.js';

export const TRUST_DOMAIN = 'cluster.local';
export const NODE_NAME = 'cni-node-1';
const BROKER_SA = 'certbroker-node';

export interface BrokerStack {
  readonly broker: Broker;
  readonly ca: CaServer;
  /** JSON log lines the broker wrote. */
  readonly logs: string[];
  stop(): Promise<void>;
}

function kubeConfig(pc: PluginCluster, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(pc.cluster.kubeconfigYaml({ token }));
  return kc;
}

export async function startBrokerStack(pc: PluginCluster): Promise<BrokerStack> {
  const { cluster } = pc;
  await cluster.apply([
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: BROKER_SA, namespace: CNI_NAMESPACE } },
    ...brokerRbacObjects({ namespace: CNI_NAMESPACE, serviceAccount: BROKER_SA }),
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'certbroker-node-q4v9z', namespace: CNI_NAMESPACE },
      spec: { nodeName: NODE_NAME, serviceAccountName: BROKER_SA, containers: [{ name: 'broker', image: 'certbroker' }] },
    },
  ]);
  const pod = (await adminRequest(cluster, 'GET', `/api/v1/namespaces/${CNI_NAMESPACE}/pods/certbroker-node-q4v9z`)) as {
    metadata: { uid: string };
  };
  const tr = (await adminRequest(cluster, 'POST', `/api/v1/namespaces/${CNI_NAMESPACE}/serviceaccounts/${BROKER_SA}/token`, {
    spec: { audiences: [cluster.issuer], expirationSeconds: 3600 },
  })) as { status: { token: string } };

  const admin = kubeConfig(pc, cluster.adminToken);
  const ca = await startCaServer({
    grpcHost: '127.0.0.1',
    grpcPort: 0,
    plaintext: false,
    trustDomain: TRUST_DOMAIN,
    servingDnsNames: ['localhost', '127.0.0.1'],
    defaultTtlSeconds: 3600,
    maxTtlSeconds: 90 * 86400,
    trustedNodeAccounts: [`${CNI_NAMESPACE}/${BROKER_SA}`],
    clusters: [{ id: 'Kubernetes', kubeConfig: admin, audiences: ['istio-ca'], tokenReview: true }],
    defaultClusterId: 'Kubernetes',
    signer: { kind: 'self-signed', namespace: CNI_NAMESPACE, secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 365 * 86400 },
    tokenCacheSeconds: 60,
    signingWorkers: 1,
    shutdownGraceMs: 500,
    logger: silentLogger,
  });
  for (let i = 0; i < 400 && !ca.ready; i++) await delay(25);

  const logs: string[] = [];
  let broker: Broker;
  try {
    broker = await startBroker({
      trustDomain: TRUST_DOMAIN,
      nodeName: NODE_NAME,
      pod: { namespace: CNI_NAMESPACE, name: 'certbroker-node-q4v9z', uid: pod.metadata.uid, serviceAccount: BROKER_SA },
      ca: { address: `127.0.0.1:${ca.port}`, rootsPem: ca.rootsPem(), clusterId: 'Kubernetes', audience: 'istio-ca', certTtlSeconds: 3600 },
      tokenExpirationSeconds: 3600,
      maxConcurrentFetches: 8,
      forgetGraceMs: 30_000,
      brokerSocketPath: join(pc.runDir, 'broker.sock'),
      cniEventSocketPath: join(pc.runDir, 'pluginevent.sock'),
      allowedCallers: [`spiffe://${TRUST_DOMAIN}/ns/${CNI_NAMESPACE}/sa/ztunnel`],
      updateJitterMs: 20,
      shutdownGraceMs: 1000,
      kubeConfig: kubeConfig(pc, tr.status.token),
      logger: createLogger({ level: 'info', sink: (line) => logs.push(line) }),
    });
    await broker.whenReady(AbortSignal.timeout(20_000));
  } catch (err) {
    await ca.stop();
    throw new Error(`broker did not start: ${err instanceof Error ? err.message : String(err)}\n${logs.slice(-10).join('\n')}`);
  }
  return {
    broker,
    ca,
    logs,
    async stop() {
      await broker.stop(1000).catch(() => undefined);
      await ca.stop().catch(() => undefined);
    },
  };
}
