/**
 * The broker's security boundaries end to end (devcluster over HTTPS with the broker's RBAC, the
 * real CA over TLS, the real sockets):
 * - both sockets are 0600;
 * - a CNI registration cannot make the broker call the CA for a pod it does not run: pods of
 *   another node, unknown pods, host-network pods and the broker's own pod give no identity and
 *   no CA call; a pod of this node gives exactly one;
 * - the Broker API's mTLS refuses a client whose certificate carries an allow-listed SPIFFE ID but
 *   chains to another root, and a client with no certificate, before any workload is resolved;
 * - at debug level the broker's log holds no token and no private key.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ChannelCredentials, makeGenericClientConstructor, status as GrpcStatus, type Client, type ServiceError } from '@grpc/grpc-js';
import { type Broker, BrokerClient, firstMessage, startBroker } from '../../src/broker/index.js';
import { createLogger } from '../../src/core/log.js';
import { Secret } from '../../src/core/secret.js';
import { healthServiceDefinition } from '../../src/grpc/health.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD } from './support/stack.js';
import { eventually } from './support/eventually.js';
import { requestUnix } from './support/unix-http.js';
import { opensslMissing } from '../support/tools.js';

function postCmdAdd(socketPath: string, body: object): Promise<{ status: number; text: string }> {
  return requestUnix(socketPath, '/cmdadd', JSON.stringify(body));
}

describe('node broker security boundaries (devcluster + CA over TLS)', () => {
  let stack: Stack;
  let broker: Broker;
  const logs: string[] = [];

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-sec-', namespaces: ['shop'], serviceAccounts: ['shop/cart', 'shop/remote', 'shop/hostnet', 'shop/local'] });
    const logger = createLogger({ level: 'debug', sink: (l) => logs.push(l) });
    broker = await startBroker(stack.brokerConfig({ logger, name: 'sec' }));
    await broker.whenReady(AbortSignal.timeout(20_000));
  });

  after(async () => {
    await broker?.stop(500);
    await stack?.close();
  });

  it('both sockets are 0600', async () => {
    assert.equal((await stat(broker.brokerSocketPath)).mode & 0o777, 0o600);
    assert.equal((await stat(broker.cniEventSocketPath)).mode & 0o777, 0o600);
  });

  it('registrations of pods it does not run cause no CA call; a pod of this node causes exactly one', async () => {
    await stack.createPod({ namespace: 'shop', name: 'remote-0', serviceAccount: 'remote', nodeName: 'node-2' });
    await stack.createPod({ namespace: 'shop', name: 'hostnet-0', serviceAccount: 'hostnet', nodeName: NODE, hostNetwork: true });
    const before = broker.certs.caCalls;
    const socket = broker.cniEventSocketPath;
    const event = (ns: string, name: string) => ({ Netns: `/var/run/netns/${name}`, PodName: name, PodNamespace: ns, IPs: null });

    const remote = await postCmdAdd(socket, event('shop', 'remote-0'));
    assert.equal(remote.status, 400, remote.text);
    assert.equal((await postCmdAdd(socket, event('shop', 'ghost-0'))).status, 404, 'a pod the API server does not know');
    const hostnet = await postCmdAdd(socket, event('shop', 'hostnet-0'));
    assert.equal(hostnet.status, 200);
    assert.deepEqual(JSON.parse(hostnet.text), { registered: false, reason: 'host-network' });
    const self = await postCmdAdd(socket, event(stack.brokerPod.namespace, stack.brokerPod.name));
    assert.deepEqual(JSON.parse(self.text), { registered: false, reason: 'self' });

    const tracked = () => broker.certs.statuses().map((s) => s.identity);
    for (const sa of ['remote', 'hostnet']) assert.ok(!tracked().includes(`spiffe://${TD}/ns/shop/sa/${sa}`), sa);
    assert.equal(broker.pods.byKey('shop', 'remote-0'), undefined);
    assert.equal(broker.pods.byKey('shop', 'ghost-0'), undefined);

    // A pod that really runs here: registered, fetched once (also what the watch would do).
    await stack.createPod({ namespace: 'shop', name: 'local-0', serviceAccount: 'local', nodeName: NODE });
    const local = await postCmdAdd(socket, event('shop', 'local-0'));
    assert.deepEqual(JSON.parse(local.text), { registered: true, identity: `spiffe://${TD}/ns/shop/sa/local` });
    await eventually('local certificate', () => broker.certs.current(`spiffe://${TD}/ns/shop/sa/local`));
    assert.equal(broker.certs.caCalls, before + 1, 'only the pod of this node reached the CA');
  });

  it('Broker API mTLS: a foreign-root certificate with the allow-listed ID, and no certificate at all, are refused', { skip: opensslMissing() }, async () => {
    await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    const cartUid = (await eventually('cart-0 tracked', () => broker.pods.byKey('shop', 'cart-0'))).uid;
    const meshRoots = stack.ca.rootsPem();

    // Control: the real consumer SVID works.
    const consumer = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    const good = new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: meshRoots, certChainPem: consumer.certChainPem, privateKeyPem: consumer.privateKeyPem, trustDomain: TD });
    try {
      const msg = await firstMessage(good.subscribeX509Svid({ uid: cartUid }));
      assert.equal(msg.svids[0]!.spiffe_id, `spiffe://${TD}/ns/shop/sa/cart`);
    } finally {
      good.close();
    }

    // Same SPIFFE ID, issued by a root the broker does not trust (made with openssl).
    const pki = join(stack.dir, 'foreign');
    await mkdir(pki, { recursive: true });
    const ossl = (...args: string[]) => execFileSync('openssl', args, { cwd: pki, stdio: ['ignore', 'pipe', 'pipe'] });
    ossl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'root.key', '-out', 'root.pem', '-subj', '/O=foreign', '-days', '1');
    ossl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/O=foreign');
    const ext = join(pki, 'leaf.ext');
    await writeFile(ext, `subjectAltName=critical,URI:spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n`);
    ossl('x509', '-req', '-in', 'leaf.csr', '-CA', 'root.pem', '-CAkey', 'root.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '1', '-extfile', ext);
    // Well formed: openssl accepts it under its own root (so only the root can be the reason).
    ossl('verify', '-CAfile', 'root.pem', '-purpose', 'sslclient', 'leaf.pem');
    const foreign = new BrokerClient({
      socketPath: broker.brokerSocketPath,
      rootsPem: meshRoots,
      certChainPem: (await readFile(join(pki, 'leaf.pem'), 'utf8')) + (await readFile(join(pki, 'root.pem'), 'utf8')),
      privateKeyPem: new Secret(await readFile(join(pki, 'leaf.key'), 'utf8')),
      trustDomain: TD,
    });
    const rejectionsBefore = logs.filter((l) => l.includes('Broker API call refused')).length;
    try {
      await assert.rejects(firstMessage(foreign.subscribeX509Svid({ uid: cartUid })), (e: unknown) => (e as ServiceError).code === GrpcStatus.UNAVAILABLE);
    } finally {
      foreign.close();
    }
    // Refused in the TLS handshake: the service never saw the call.
    assert.equal(logs.filter((l) => l.includes('Broker API call refused')).length, rejectionsBefore);

    // No client certificate: gRPC health over TLS without one.
    const Health = makeGenericClientConstructor(healthServiceDefinition(), 'Health');
    const anonymous = new Health(
      `unix://${broker.brokerSocketPath}`,
      ChannelCredentials.createSsl(Buffer.from(meshRoots), null, null, { checkServerIdentity: () => undefined }),
    ) as unknown as Client & { Check(req: { service: string }, cb: (e: ServiceError | null) => void): void };
    try {
      const err = await new Promise<ServiceError | null>((resolve) => anonymous.Check({ service: '' }, (e) => resolve(e)));
      assert.equal(err?.code, GrpcStatus.UNAVAILABLE, String(err?.details));
    } finally {
      anonymous.close();
    }
  });

  it('at debug level the log holds no token and no private key', async () => {
    const apiToken = (stack.brokerKubeConfig.getCurrentUser()?.token ?? '') as string;
    assert.ok(apiToken.length > 20);
    const text = logs.join('\n');
    assert.ok(logs.some((l) => l.includes('"level":"debug"')), 'debug records were written');
    assert.ok(!text.includes(apiToken.split('.')[2]!), 'API token not logged');
    assert.ok(!/eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\./.test(text), 'no JWT in the log');
    assert.ok(!text.includes('PRIVATE KEY'), 'no PEM key in the log');
    const key = broker.certs.current(`spiffe://${TD}/ns/shop/sa/cart`)!.privateKey.reveal();
    assert.ok(!text.includes(key.toString('base64').slice(20, 60)), 'workload key bytes not logged (base64)');
    assert.ok(!text.includes(key.toString('hex').slice(20, 80)), 'workload key bytes not logged (hex)');
  });
});
