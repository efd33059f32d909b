/**
 * `BROKER_TOKEN_SOURCE=file`: the broker takes its CA token only from the kubelet-projected file
 * (audience istio-ca, bound to its pod) and needs no `serviceaccounts/token` permission — the
 * permission with which anyone holding the broker's API credentials can mint a token bound to
 * another node's broker pod and obtain that node's workload identities.
 *
 * Against the devcluster with the broker's RBAC minus the token Role, and the real CA over TLS.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { type Broker, BrokerClient, brokerRbacObjects, firstMessage, readBrokerConfig, startBroker } from '../../src/broker/index.js';
import { ConfigError } from '../../src/core/config.js';
import { createLogger, silentLogger } from '../../src/core/log.js';
import { BROKER_NS, BROKER_SA, CONSUMER_SA, NODE, Stack, TD } from './support/stack.js';

describe('broker token from the projected file only (BROKER_TOKEN_SOURCE=file)', () => {
  let stack: Stack;
  let broker: Broker;
  const logs: string[] = [];

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-tokfile-', namespaces: ['shop'], serviceAccounts: ['shop/cart'] });
    // The broker's RBAC without serviceaccounts/token.
    const rbac = stack.admin.makeApiClient(RbacAuthorizationV1Api);
    const tokenRole = brokerRbacObjects({ namespace: BROKER_NS, serviceAccount: BROKER_SA }).find((o) => (o as { kind: string }).kind === 'RoleBinding') as {
      metadata: { name: string };
    };
    await rbac.deleteNamespacedRoleBinding({ name: tokenRole.metadata.name, namespace: BROKER_NS });
    // What the kubelet projects into the broker pod: a token for its service account, audience
    // istio-ca, bound to the pod.
    const res = await stack.core.createNamespacedServiceAccountToken({
      name: BROKER_SA,
      namespace: BROKER_NS,
      body: {
        spec: {
          audiences: ['istio-ca'],
          expirationSeconds: 3600,
          boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: stack.brokerPod.name, uid: stack.brokerPod.uid },
        },
      },
    });
    const tokenFile = join(stack.dir, 'istio-token');
    await writeFile(tokenFile, res.status!.token, { mode: 0o600 });
    broker = await startBroker({
      ...stack.brokerConfig({ name: 'tokfile', logger: createLogger({ level: 'debug', sink: (l) => logs.push(l) }) }),
      tokenSource: 'file',
      tokenFile,
    });
    await broker.whenReady(AbortSignal.timeout(20_000));
  });

  after(async () => {
    await broker?.stop(500);
    await stack?.close();
  });

  it('becomes ready and serves a workload from the projected token alone, never calling TokenRequest', async () => {
    await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    const consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    const client = new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: stack.ca.rootsPem(), certChainPem: consumer.certChainPem, privateKeyPem: consumer.privateKeyPem, trustDomain: TD });
    try {
      const msg = await firstMessage(client.subscribeX509Svid({ namespace: 'shop', name: 'cart-0' }));
      assert.equal(msg.svids[0]!.spiffe_id, `spiffe://${TD}/ns/shop/sa/cart`);
    } finally {
      client.close();
    }
    const obtained = logs.filter((l) => l.includes('"msg":"broker token obtained"')).map((l) => JSON.parse(l) as { source: string });
    assert.ok(obtained.length >= 1);
    assert.ok(obtained.every((r) => r.source === 'file'), JSON.stringify(obtained));
    assert.ok(!logs.some((l) => l.includes('token request failed')), 'TokenRequest was never tried');
  });

  it('without the token Role the broker credentials cannot mint a token bound to another node\'s broker pod', async () => {
    const other = await stack.core.createNamespacedPod({
      namespace: BROKER_NS,
      body: { metadata: { name: 'certbroker-node-other' }, spec: { nodeName: 'node-2', serviceAccountName: BROKER_SA, containers: [{ name: 'broker', image: 'certbroker' }] } },
    });
    const api = stack.brokerKubeConfig.makeApiClient(CoreV1Api);
    await assert.rejects(
      api.createNamespacedServiceAccountToken({
        name: BROKER_SA,
        namespace: BROKER_NS,
        body: { spec: { audiences: ['istio-ca'], expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: 'certbroker-node-other', uid: other.metadata!.uid! } } },
      }),
      (e: unknown) => (e as { code?: number }).code === 403,
    );
  });

  it('configuration: file needs BROKER_TOKEN_FILE; unknown sources are refused; RBAC objects without the token Role', async () => {
    const env = { NODE_NAME: 'n', POD_NAME: 'p', POD_NAMESPACE: 'ns', POD_UID: 'u', CA_ROOT_CERT_FILE: '/nonexistent' };
    await assert.rejects(readBrokerConfig({ env: { ...env, BROKER_TOKEN_SOURCE: 'file' }, logger: silentLogger }), (e: unknown) =>
      e instanceof ConfigError && /BROKER_TOKEN_SOURCE=file needs BROKER_TOKEN_FILE/.test(e.message),
    );
    await assert.rejects(readBrokerConfig({ env: { ...env, BROKER_TOKEN_SOURCE: 'magic' }, logger: silentLogger }), (e: unknown) =>
      e instanceof ConfigError && /BROKER_TOKEN_SOURCE="magic" is not token-request or file/.test(e.message),
    );
    const kinds = brokerRbacObjects({ namespace: BROKER_NS, serviceAccount: BROKER_SA, tokenRequest: false }).map((o) => (o as { kind: string }).kind);
    assert.deepEqual(kinds, ['ClusterRole', 'ClusterRoleBinding']);
  });
});
