/**
 * The node broker end to end: the devcluster over HTTPS (RBAC enforced for the broker), the
 * real CA over TLS (TokenReview, node authorization), the Broker API over a Unix socket with
 * mTLS, CNI registrations through the CNI plugin's own client. Time only moves by `SkipClock`
 * skips (to reach half-life), never by waiting for it.
 */
import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { execFile } from 'node:child_process';
import { stat, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { type Broker, BrokerClient, brokerServiceDefinition, firstMessage, runFetch, splitDerCertificates, startBroker } from '../../src/broker/index.js';
import type { FetchJWTSVIDRequest, FetchJWTSVIDResponse } from '../../src/protocol/spiffe-broker.js';
import { typedMethod } from '../../src/grpc/typed-methods.js';
import { pushCniAddEvent } from '../../src/cni/plugin/cni-event-client.js';
import { createLogger } from '../../src/core/log.js';
import { SkipClock } from '../support/skip-clock.js';
import { createRootCa } from '../../src/pki/index.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD, tokenFor, type Svid } from './support/stack.js';
import { eventually } from './support/eventually.js';
import { leafOf, SvidRecorder } from './support/svid-recorder.js';
import { refusedWith } from './support/error-info.js';
import { fileContainingSymbol, linkProblems, listServices, reflect, reflectionClientConstructor, type ReflectionClient } from '../support/grpc-reflection.js';
import { opensslMissing } from '../support/tools.js';

const run = promisify(execFile);

const HOUR = 3_600_000;
const cartId = `spiffe://${TD}/ns/shop/sa/cart`;
const webId = `spiffe://${TD}/ns/shop/sa/web`;

function grpcError(code: GrpcStatus): (err: unknown) => boolean {
  return (err: unknown) => (err as ServiceError).code === code;
}

describe('node broker end to end (devcluster + CA over TLS)', () => {
  let stack: Stack;
  let clock: SkipClock;
  let broker: Broker;
  let consumerSvid: Svid;
  let client: BrokerClient;

  const newClient = (svid: Svid) =>
    new BrokerClient({
      socketPath: broker.brokerSocketPath,
      rootsPem: stack.ca.rootsPem(),
      certChainPem: svid.certChainPem,
      privateKeyPem: svid.privateKeyPem,
      trustDomain: TD,
    });

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-e2e-', namespaces: ['shop'], serviceAccounts: ['shop/cart', 'shop/web', 'shop/batch'] });
    clock = new SkipClock();
    broker = await startBroker(stack.brokerConfig({ clock, ...(process.env.BROKER_TEST_DEBUG ? { logger: createLogger({ level: 'debug' }) } : {}) }));
    await broker.whenReady(AbortSignal.timeout(20_000));
    consumerSvid = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    client = newClient(consumerSvid);
  });

  after(async () => {
    client?.close();
    await broker?.stop(500);
    await stack?.close();
  });

  it('serves a pod created on the node: the SVID carries its service account, the key matches, the bundle is the mesh root', async () => {
    const uid = await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    await eventually('cart identity ready', () => broker.certs.current(cartId));
    const stream = client.subscribeX509Svid({ uid });
    const msg = await firstMessage(stream);
    stream.cancel();
    assert.equal(msg.svids.length, 1);
    const svid = msg.svids[0]!;
    assert.equal(svid.spiffe_id, cartId);
    const chain = splitDerCertificates(svid.x509_svid).map((d) => new X509Certificate(d));
    assert.ok(chain[0]!.subjectAltName?.includes(`URI:${cartId}`));
    const pub = createPublicKey(createPrivateKey({ key: svid.x509_svid_key, format: 'der', type: 'pkcs8' }));
    assert.ok(chain[0]!.publicKey.export({ type: 'spki', format: 'der' }).equals(pub.export({ type: 'spki', format: 'der' })));
    const roots = splitDerCertificates(svid.bundle).map((d) => new X509Certificate(d));
    assert.ok(roots.some((r) => chain.at(-1)!.verify(r.publicKey)), 'chain verifies against the bundle');
    assert.equal(roots.map((r) => r.toString()).join(''), new X509Certificate(stack.ca.rootsPem()).toString());

    // The same pod by namespace/name, and by both (the UID must match).
    const byKey = client.subscribeX509Svid({ namespace: 'shop', name: 'cart-0' });
    assert.equal((await firstMessage(byKey)).svids[0]!.spiffe_id, cartId);
    byKey.cancel();
    const both = client.subscribeX509Svid({ namespace: 'shop', name: 'cart-0', uid });
    assert.equal((await firstMessage(both)).svids[0]!.spiffe_id, cartId);
    both.cancel();
    const wrongUid = client.subscribeX509Svid({ namespace: 'shop', name: 'cart-0', uid: '00000000-0000-4000-8000-000000000000' });
    await assert.rejects(firstMessage(wrongUid), grpcError(GrpcStatus.NOT_FOUND));
  });

  it('refuses a pod of another node, a request without the header, a bad reference, a caller off the allow-list; JWT is unimplemented', async () => {
    const otherUid = await stack.createPod({ namespace: 'shop', name: 'cart-remote', serviceAccount: 'cart', nodeName: 'node-2' });
    await assert.rejects(firstMessage(client.subscribeX509Svid({ uid: otherUid })), grpcError(GrpcStatus.NOT_FOUND));
    await assert.rejects(firstMessage(client.subscribeX509Svid({ namespace: 'shop', name: 'nope' })), grpcError(GrpcStatus.NOT_FOUND));

    const cartUid = broker.pods.byKey('shop', 'cart-0')!.uid;
    await assert.rejects(firstMessage(client.subscribeX509Svid({ uid: cartUid }, { header: false })), grpcError(GrpcStatus.INVALID_ARGUMENT));
    await assert.rejects(firstMessage(client.subscribeX509Svid({ uid: 'not-a-uuid' })), grpcError(GrpcStatus.INVALID_ARGUMENT));
    await assert.rejects(firstMessage(client.subscribeX509Svid({})), grpcError(GrpcStatus.INVALID_ARGUMENT));

    const outsider = newClient(await stack.ownSvid('shop', 'web'));
    try {
      await assert.rejects(firstMessage(outsider.subscribeX509Svid({ uid: cartUid })), grpcError(GrpcStatus.PERMISSION_DENIED));
    } finally {
      outsider.close();
    }

    const jwt = await new Promise<ServiceError | null>((resolve) => {
      const fetchJwt = typedMethod<FetchJWTSVIDRequest, FetchJWTSVIDResponse>(brokerServiceDefinition(), 'FetchJWTSVID');
      const md = new Metadata();
      md.set('broker.spiffe.io', 'true');
      client.client.makeUnaryRequest(fetchJwt.path, fetchJwt.requestSerialize, fetchJwt.responseDeserialize, { audience: ['x'] }, md, (e) => resolve(e));
    });
    assert.equal(jwt?.code, GrpcStatus.UNIMPLEMENTED);
  });

  it('gives nothing to a host-network pod (registration answered, no identity; PERMISSION_DENIED WORKLOAD_NOT_ENTITLED), and serves gRPC health', async () => {
    const uid = await stack.createPod({ namespace: 'shop', name: 'node-agent', serviceAccount: 'batch', nodeName: NODE, hostNetwork: true });
    await pushCniAddEvent({ Netns: '', PodName: 'node-agent', PodNamespace: 'shop', IPs: null }, { socketPath: broker.cniEventSocketPath, timeoutMs: 5000 });
    assert.equal(broker.pods.byUid(uid), undefined);
    assert.equal(broker.certs.status(`spiffe://${TD}/ns/shop/sa/batch`), undefined);
    // The pod exists on this node but is not entitled (SPIFFE Broker API 4.8), by UID and by name.
    await assert.rejects(firstMessage(client.subscribeX509Svid({ uid })), refusedWith(GrpcStatus.PERMISSION_DENIED, 'WORKLOAD_NOT_ENTITLED'));
    await assert.rejects(
      firstMessage(client.subscribeX509Svid({ namespace: 'shop', name: 'node-agent' })),
      refusedWith(GrpcStatus.PERMISSION_DENIED, 'WORKLOAD_NOT_ENTITLED'),
    );
    assert.equal(await client.health(''), 'SERVING');
    assert.equal(await client.health('spiffe.broker.API'), 'SERVING');
  });

  it('server reflection on the broker socket (mTLS): lists the Broker API and health, describes spiffe.broker.API and its methods', async () => {
    const r = client.serviceClient<ReflectionClient>(reflectionClientConstructor());
    try {
      const services = await listServices(r);
      assert.ok(services.includes('spiffe.broker.API'), services.join(','));
      assert.ok(services.includes('grpc.health.v1.Health'), services.join(','));

      const files = await fileContainingSymbol(r, 'spiffe.broker.API');
      // Real file names and imports, so grpcurl/protoc-style clients can link them.
      assert.deepEqual(files.map((f) => f.name).sort(), ['google/protobuf/any.proto', 'spiffe/broker/broker.proto']);
      assert.deepEqual(linkProblems(files), []);
      const broker = files.find((f) => f.package === 'spiffe.broker' && f.service?.some((s) => s.name === 'API'));
      assert.ok(broker, `no file of package spiffe.broker with service API among ${files.map((f) => f.name).join(',')}`);
      // The reference travels packed in google.protobuf.Any: its file comes with the answer.
      assert.ok(
        files.some((f) => f.package === 'google.protobuf' && f.messageType?.some((m) => m.name === 'Any')),
        `google.protobuf.Any missing from ${files.map((f) => f.name).join(',')}`,
      );
      const api = broker.service!.find((s) => s.name === 'API')!;
      assert.deepEqual(
        (api.method ?? []).map((m) => [m.name, m.inputType, m.outputType, m.serverStreaming ?? false]),
        [
          ['SubscribeToX509SVID', '.spiffe.broker.SubscribeToX509SVIDRequest', '.spiffe.broker.SubscribeToX509SVIDResponse', true],
          ['SubscribeToX509Bundles', '.spiffe.broker.SubscribeToX509BundlesRequest', '.spiffe.broker.SubscribeToX509BundlesResponse', true],
          ['FetchJWTSVID', '.spiffe.broker.FetchJWTSVIDRequest', '.spiffe.broker.FetchJWTSVIDResponse', false],
          ['SubscribeToJWTBundles', '.spiffe.broker.SubscribeToJWTBundlesRequest', '.spiffe.broker.SubscribeToJWTBundlesResponse', true],
        ],
      );

      const unknown = await reflect(r, { file_containing_symbol: 'spiffe.broker.NoSuchThing' });
      assert.equal(unknown.error_response?.error_code, GrpcStatus.NOT_FOUND);
    } finally {
      r.close();
    }
  });

  it('keeps following the node after dropped watches and a compacted history (410 -> re-list)', async () => {
    stack.dc.faults.compact();
    assert.ok(stack.dc.faults.dropWatches() > 0);
    const uid = await stack.createPod({ namespace: 'shop', name: 'web-late', serviceAccount: 'web', nodeName: NODE });
    await eventually('pod seen after the watch broke', () => broker.pods.byUid(uid));
    await stack.deletePod('shop', 'web-late');
    await eventually('deletion seen', () => (broker.pods.byUid(uid) === undefined ? true : undefined));
  });

  it('bundle stream answers at once; a trust bundle change reaches every open stream with the full state', async () => {
    const cartUid = broker.pods.byKey('shop', 'cart-0')!.uid;
    const bundles: Array<Record<string, Buffer>> = [];
    const bs = client.subscribeX509Bundles({ uid: cartUid });
    bs.on('data', (m: { bundles: Record<string, Buffer> }) => bundles.push(m.bundles));
    bs.on('error', () => undefined);
    const svids = new SvidRecorder(client.subscribeX509Svid({ uid: cartUid }));
    await eventually('first messages', () => (bundles.length >= 1 && svids.messages.length >= 1) || undefined);
    assert.deepEqual(Object.keys(bundles[0]!), [`spiffe://${TD}`]);

    // A second root appears (as when the CA starts a root rotation and sends both).
    const extra = await createRootCa({ subject: 'CN=next root', ttlSeconds: 86400 });
    const current = broker.bundle.rootsDer;
    assert.equal(broker.bundle.update([...current, Buffer.from(extra.der)]), true);
    await eventually('both streams updated', () => (bundles.length >= 2 && svids.messages.length >= 2) || undefined);
    assert.equal(splitDerCertificates(bundles.at(-1)![`spiffe://${TD}`]!).length, 2);
    const svid = svids.messages.at(-1)!.svids[0]!;
    assert.equal(svid.spiffe_id, cartId, 'full state: the SVID comes again with the new bundle');
    assert.equal(splitDerCertificates(svid.bundle).length, 2);
    broker.bundle.update(current);
    bs.cancel();
    svids.stream.cancel();
  });

  it('registers a pod through the CNI socket (the plugin client) and shares one certificate between two pods of one service account', async () => {
    await stack.createPod({ namespace: 'shop', name: 'web-0', serviceAccount: 'web', nodeName: NODE });
    await pushCniAddEvent(
      { Netns: '/var/run/netns/web-0', PodName: 'web-0', PodNamespace: 'shop', IPs: [{ Interface: 0, Address: { IP: '10.244.0.7', Mask: '////AA==' }, Gateway: null }] },
      { socketPath: broker.cniEventSocketPath, timeoutMs: 5000 },
    );
    assert.ok(broker.pods.byKey('shop', 'web-0'), 'registered before the watch needed to see it');
    const first = await eventually('web ready', () => broker.certs.current(webId));
    // Idempotent: a second registration changes nothing.
    await pushCniAddEvent({ Netns: '', PodName: 'web-0', PodNamespace: 'shop', IPs: null }, { socketPath: broker.cniEventSocketPath, timeoutMs: 5000 });

    const callsBefore = broker.certs.caCalls;
    const uid2 = await stack.createPod({ namespace: 'shop', name: 'web-1', serviceAccount: 'web', nodeName: NODE });
    await eventually('web-1 seen', () => broker.pods.byUid(uid2));
    const m = await firstMessage(client.subscribeX509Svid({ uid: uid2 }));
    const serial = leafOf(m).serialNumber.toLowerCase();
    assert.equal(serial, first.serial, 'second pod of the SA gets the same certificate');
    assert.equal(broker.certs.caCalls, callsBefore, 'no CA call for the second pod');
    assert.deepEqual(broker.pods.podsOf(webId).map((p) => p.name).sort(), ['web-0', 'web-1']);

    await assert.rejects(
      pushCniAddEvent({ Netns: '', PodName: 'cart-remote', PodNamespace: 'shop', IPs: null }, { socketPath: broker.cniEventSocketPath, timeoutMs: 5000 }),
      (e: unknown) => (e as { code?: string }).code === 'ERR_CNI_BROKER_REJECTED',
      'a pod of another node is refused',
    );
  });

  it('keeps serving cached certificates while the CA is down, and refreshes once it is back', async () => {
    const cartUid = broker.pods.byKey('shop', 'cart-0')!.uid;
    const rec = new SvidRecorder(client.subscribeX509Svid({ uid: cartUid }));
    await eventually('first message', () => rec.messages.length >= 1 || undefined);
    const before = broker.certs.current(cartId)!;

    await stack.stopCa();
    clock.skip(0.56 * HOUR); // past half-life (+10 % jitter at most)
    await eventually('refresh failed', () => (broker.certs.status(cartId)?.state === 'failed' ? true : undefined));
    assert.equal(broker.certs.current(cartId)?.serial, before.serial, 'old certificate still held');
    const during = await firstMessage(client.subscribeX509Svid({ uid: cartUid }));
    assert.equal(during.svids[0]!.spiffe_id, cartId, 'new subscribers are still served');
    assert.deepEqual(rec.serials(), [before.serial]);

    await stack.restartCa();
    const after = await eventually('refreshed', () => {
      clock.skip(1000); // let the backoff elapse
      const c = broker.certs.current(cartId);
      return c && c.serial !== before.serial ? c : undefined;
    });
    await eventually('stream got the rotation', () => (rec.serials().includes(after.serial) ? true : undefined));
    assert.equal(rec.ended, undefined, 'stream stayed open');
    rec.stream.cancel();
  });

  it('ends a pod stream when the pod is deleted', async () => {
    const uid = await stack.createPod({ namespace: 'shop', name: 'batch-0', serviceAccount: 'batch', nodeName: NODE });
    await eventually('batch seen', () => broker.pods.byUid(uid));
    const rec = new SvidRecorder(client.subscribeX509Svid({ uid }));
    await eventually('first message', () => rec.messages.length >= 1 || undefined).catch((e: unknown) => {
      console.error(JSON.stringify(broker.certs.status(`spiffe://${TD}/ns/shop/sa/batch`)), rec.ended);
      throw e;
    });
    await stack.deletePod('shop', 'batch-0');
    const ended = await eventually('stream ended', () => rec.ended);
    assert.notEqual(ended, 'ok');
    assert.equal((ended as ServiceError).code, GrpcStatus.NOT_FOUND);

    // The identity outlives its last pod for the grace period (30 s), then it is forgotten.
    const batchId = `spiffe://${TD}/ns/shop/sa/batch`;
    assert.ok(broker.certs.status(batchId), 'still held within the grace period');
    clock.skip(30_000);
    await eventually('batch identity forgotten', () => (broker.certs.status(batchId) === undefined ? true : undefined));
  });

  it('certbroker fetch gets its own SVID from the CA, subscribes, prints and writes PEMs that openssl verifies', { skip: opensslMissing() }, async () => {
    const tokenFile = join(stack.dir, 'ztunnel-token');
    await writeFile(tokenFile, (await tokenFor(stack.core, BROKER_NS, CONSUMER_SA, { audience: 'istio-ca', expirationSeconds: 3600 })).reveal());
    const rootFile = join(stack.dir, 'mesh-root.pem');
    await writeFile(rootFile, stack.ca.rootsPem());
    const outDir = join(stack.dir, 'fetched');
    const lines: string[] = [];
    // The CA is dialled by IP; the name to verify (and send as SNI) is the serving certificate's
    // DNS SAN, as the broker's own config does. An IP as TLS ServerName is Node's DEP0123.
    const ipServerNameWarnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => {
      if (w.code === 'DEP0123') ipServerNameWarnings.push(w.message);
    };
    process.on('warning', onWarning);
    try {
      await runFetch({
        socket: `unix://${broker.brokerSocketPath}`,
        namespace: 'shop',
        name: 'cart-0',
        caAddress: `127.0.0.1:${stack.caPort}`,
        caTlsServerName: 'localhost',
        caRootCertFile: rootFile,
        tokenFile,
        trustDomain: TD,
        outDir,
        print: (l) => lines.push(l),
      });
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off('warning', onWarning);
    }
    assert.deepEqual(ipServerNameWarnings, []);
    assert.match(lines[0]!, /^own SVID spiffe:\/\/cluster.local\/ns\/istio-system\/sa\/ztunnel serial=[0-9a-f]+$/);
    assert.match(lines[1]!, new RegExp(`^${cartId} serial=${broker.certs.current(cartId)!.serial} notBefore=\\S+ notAfter=\\S+$`));
    const verify = await run('openssl', ['verify', '-CAfile', join(outDir, 'root-cert.pem'), join(outDir, 'cert-chain.pem')]);
    assert.match(verify.stdout, /: OK/);
    const fromKey = await run('openssl', ['pkey', '-in', join(outDir, 'key.pem'), '-pubout']);
    const fromCert = await run('openssl', ['x509', '-in', join(outDir, 'cert-chain.pem'), '-pubkey', '-noout']);
    assert.equal(fromKey.stdout, fromCert.stdout);
    assert.equal((await stat(join(outDir, 'key.pem'))).mode & 0o777, 0o600);
  });

  it('recovers every identity after a broker restart', async () => {
    const before = broker.snapshot().filter((s) => s.pods.length > 0).map((s) => s.identity).sort();
    assert.ok(before.includes(cartId) && before.includes(webId));
    await broker.stop(500);
    client.close();
    broker = await startBroker(stack.brokerConfig({ clock }));
    await broker.whenReady(AbortSignal.timeout(20_000));
    client = newClient(consumerSvid);
    await eventually('all identities ready again', () => before.every((id) => broker.certs.current(id)) || undefined);
    const cartUid = broker.pods.byKey('shop', 'cart-0')!.uid;
    assert.equal((await firstMessage(client.subscribeX509Svid({ uid: cartUid }))).svids[0]!.spiffe_id, cartId);

    // Ops: ready, and the metrics the issue lists.
    const ready = await fetch(`http://127.0.0.1:${broker.opsPort}/readyz`);
    assert.equal(ready.status, 200);
    const metrics = await (await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`)).text();
    assert.match(metrics, /certbroker_broker_pod_certificate_states\{state="ready"\} [1-9]/);
    assert.match(metrics, /certbroker_broker_ca_fetch_duration_seconds_count\{outcome="success"\} [1-9]/);
    assert.match(metrics, /certbroker_broker_registration_to_ready_seconds_count [1-9]/);
    assert.match(metrics, /certbroker_broker_api_first_message_seconds_count\{rpc="x509svid"\} [1-9]/);
    assert.match(metrics, /certbroker_broker_fetch_queue_depth 0/);
    assert.match(metrics, /certbroker_broker_token_refreshes_total\{outcome="ok"\} [1-9]/);
  });
});

