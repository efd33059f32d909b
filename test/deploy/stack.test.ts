/**
 * The CA and the node broker running under the service accounts and the exact RBAC rendered
 * from deploy/: the CA authenticates with TokenReview, indexes pods and creates its
 * self-signed root in istio-ca-secret as `certbroker-ca`; the broker takes its CA token from
 * the file the kubelet projects (as the rendered DaemonSet configures it: audience, lifetime,
 * BROKER_TOKEN_SOURCE=file), watches its node's pods as `ztunnel`, and gets a workload
 * certificate by impersonation; its Istio CA front reviews a ztunnel pod's token and forwards
 * its CSR. A permission missing from deploy/ fails here.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startCaServer, type CaServer } from '../../src/ca/index.js';
import { IstioCaClient, readIstioCaFrontSettings, startBroker, type Broker } from '../../src/broker/index.js';
import { ConfigReader } from '../../src/core/config.js';
import { Secret } from '../../src/core/secret.js';
import { createCsr, generateKeyPair } from '../../src/pki/index.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { silentLogger } from '../../src/core/log.js';
import { adminClient, createPod, kubeConfigFor, serviceAccountToken, startCluster, type DevCluster } from '../support/cluster.js';
import { findObject, identityObjects } from './manifests.js';
import { kubectlMissing } from '../support/tools.js';
import { tempDirSync } from '../support/scratch.js';

const NS = 'istio-system';
const TD = 'cluster.local';
let cluster: DevCluster;
let ca: CaServer | undefined;
let broker: Broker | undefined;
let dir: string;

const skip = kubectlMissing();

before(async () => {
  if (skip) return;
  cluster = await startCluster();
  await cluster.apply(await identityObjects());
  dir = tempDirSync('deploy-stack-');
});

after(async () => {
  await broker?.stop(500).catch(() => undefined);
  await ca?.stop().catch(() => undefined);
  try {
    await cluster?.close();
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
});

test('CA and broker work with exactly the deploy/ RBAC and issue a workload certificate by impersonation', { skip }, async () => {
  const caToken = await serviceAccountToken(cluster, { namespace: NS, serviceAccountName: 'certbroker-ca' });
  ca = await startCaServer({
    grpcHost: '127.0.0.1',
    grpcPort: 0,
    plaintext: false,
    trustDomain: TD,
    servingDnsNames: ['localhost', '127.0.0.1'],
    defaultTtlSeconds: 3600,
    maxTtlSeconds: 90 * 86400,
    trustedNodeAccounts: [`${NS}/ztunnel`],
    clusters: [{ id: 'Kubernetes', kubeConfig: kubeConfigFor(cluster, caToken), audiences: ['istio-ca'], tokenReview: true }],
    defaultClusterId: 'Kubernetes',
    signer: { kind: 'self-signed', namespace: NS, secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 10 * 365 * 86400 },
    tokenCacheSeconds: 60,
    signingWorkers: 0,
    shutdownGraceMs: 500,
    logger: silentLogger,
  });
  for (let i = 0; i < 400 && !ca.ready; i++) await new Promise((r) => setTimeout(r, 25));
  assert.ok(ca.ready, 'CA ready: its pod informer synced under the deploy/ RBAC');
  const secret = await adminClient(cluster).core.readNamespacedSecret({ namespace: NS, name: 'istio-ca-secret' });
  assert.ok(secret.data?.['ca-cert.pem'], 'the CA created its root secret as certbroker-ca');

  const brokerPod = await createPod(cluster, { namespace: NS, name: 'certbroker-node-broker-abcde', serviceAccountName: 'ztunnel', nodeName: 'node-a' });
  await createPod(cluster, { namespace: 'app', name: 'web-1', serviceAccountName: 'web', nodeName: 'node-a' });
  const brokerApiToken = await serviceAccountToken(cluster, { namespace: NS, serviceAccountName: 'ztunnel' });
  // What the kubelet writes into the broker pod for the DaemonSet's projected token volume.
  const projection = await brokerTokenProjection();
  assert.equal(projection.tokenSource, 'file', 'deploy/ runs the broker on the projected token');
  const projected = await adminClient(cluster).core.createNamespacedServiceAccountToken({
    namespace: NS,
    name: 'ztunnel',
    body: {
      spec: {
        audiences: [projection.audience],
        expirationSeconds: projection.expirationSeconds,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: brokerPod.metadata!.name!, uid: brokerPod.metadata!.uid! },
      },
    },
  });
  const tokenFile = join(dir, 'istio-token');
  writeFileSync(tokenFile, projected.status!.token, { mode: 0o600 });
  broker = await startBroker({
    trustDomain: TD,
    nodeName: 'node-a',
    pod: { namespace: NS, name: brokerPod.metadata!.name!, uid: brokerPod.metadata!.uid!, serviceAccount: 'ztunnel' },
    ca: {
      address: `127.0.0.1:${ca.port}`,
      rootsPem: ca.rootsPem(),
      tlsServerName: 'localhost',
      clusterId: 'Kubernetes',
      audience: 'istio-ca',
      certTtlSeconds: 3600,
    },
    tokenExpirationSeconds: 3600,
    tokenSource: 'file',
    tokenFile,
    maxConcurrentFetches: 4,
    forgetGraceMs: 30_000,
    brokerSocketPath: join(dir, 'broker.sock'),
    cniEventSocketPath: join(dir, 'pluginevent.sock'),
    allowedCallers: [`spiffe://${TD}/ns/${NS}/sa/ztunnel`],
    updateJitterMs: 10,
    shutdownGraceMs: 500,
    kubeConfig: kubeConfigFor(cluster, brokerApiToken),
    logger: silentLogger,
    istioCaFront: { ...readIstioCaFrontSettings(new ConfigReader({}), { host: '127.0.0.1', port: 0 }, {}) },
  });
  const ready = new AbortController();
  const timer = setTimeout(() => ready.abort(new Error('broker not ready')), 20_000);
  await broker.whenReady(ready.signal).finally(() => clearTimeout(timer));

  const identity = `spiffe://${TD}/ns/app/sa/web`;
  for (let i = 0; i < 400; i++) {
    if (broker.snapshot().some((s) => s.identity === identity && s.state === 'ready')) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  const status = broker.snapshot().find((s) => s.identity === identity);
  assert.equal(status?.state, 'ready', `workload certificate issued (last error: ${status?.lastError ?? 'none'})`);

  // The Istio CA front as ztunnel uses it: a TokenReview of a ztunnel pod's token (the
  // tokenreviews rule of deploy/), then the CSR forwarded by impersonation.
  const ztunnelPod = await createPod(cluster, { namespace: NS, name: 'ztunnel-x1', serviceAccountName: 'ztunnel', nodeName: 'node-a' });
  const ztunnelToken = await adminClient(cluster).core.createNamespacedServiceAccountToken({
    namespace: NS,
    name: 'ztunnel',
    body: { spec: { audiences: ['istio-ca'], expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'ztunnel-x1', uid: ztunnelPod.metadata!.uid! } } },
  });
  for (let i = 0; i < 400 && !broker.pods.byUid(ztunnelPod.metadata!.uid!); i++) await new Promise((r) => setTimeout(r, 25));
  const viaFront = new IstioCaClient({
    address: `127.0.0.1:${broker.istioCaFrontPort}`,
    caRootsPem: ca.rootsPem(),
    tlsServerName: 'localhost',
    tokens: { token: async () => new Secret(ztunnelToken.status!.token) },
    clusterId: 'Kubernetes',
    certTtlSeconds: 3600,
    impersonate: true,
  });
  try {
    const { privateKey } = await generateKeyPair();
    const chain = await viaFront.forwardCsr({ csrPem: createCsr({ privateKey, uri: identity }).pem, identity, ttlSeconds: 3600 }, AbortSignal.timeout(20_000));
    assert.equal(checkX509Svid(chain.certChain[0]!)?.id, identity, "the front issued the workload identity for ztunnel");
  } finally {
    viaFront.close();
  }
});

/** The broker container's token settings as the rendered DaemonSet has them. */
async function brokerTokenProjection(): Promise<{ tokenSource: string | undefined; audience: string; expirationSeconds: number }> {
  const ds = (await findObject('DaemonSet', 'certbroker-node-broker')) as unknown as {
    spec: { template: { spec: { containers: Array<{ name: string; env?: Array<{ name: string; value?: string }> }>; volumes: Array<{ projected?: { sources: Array<{ serviceAccountToken?: { audience?: string; expirationSeconds?: number } }> } }> } } };
  };
  const pod = ds.spec.template.spec;
  const env = new Map((pod.containers.find((c) => c.name === 'broker')?.env ?? []).map((e) => [e.name, e.value]));
  const sat = pod.volumes.flatMap((v) => v.projected?.sources ?? []).find((x) => x.serviceAccountToken)?.serviceAccountToken;
  if (!sat?.audience || !sat.expirationSeconds) throw new Error('the broker DaemonSet projects no serviceAccountToken with audience and expirationSeconds');
  return { tokenSource: env.get('BROKER_TOKEN_SOURCE'), audience: sat.audience, expirationSeconds: sat.expirationSeconds };
}
