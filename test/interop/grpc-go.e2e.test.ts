/**
 * Interop with grpc-go, the gRPC implementation most of the ecosystem's Go consumers use (SPIRE,
 * Istio's agents, CA integrators): certbroker's own client (test/interop/grpc-go-client/main.go,
 * hand-encoded messages, no generated code) built from Debian's grpc-go 1.33 sources, offline, by
 * test/support/grpc-go.ts. Against the real CA (devcluster, TLS trusting the mesh root) on each of
 * its transports, and the real node broker: the SPIFFE Workload API (the client process placed in
 * a kubelet-style pod cgroup before it connects; root, cgroup v2) and the SPIFFE Broker API (mTLS
 * over the Unix socket, the broker named by its SPIFFE ID, as a data plane calls it).
 *
 * The first Go build takes ~20 s here (2 cores, empty Go build cache; the whole file ~24 s then);
 * the binary is then cached under the OS temp dir and the file runs in ~4 s. Skipped, with the
 * reason, where Go or the Go sources (or, for the Workload API part, cgroup v2 as root) are missing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CaServer } from '../../src/ca/index.js';
import { startBroker, type Broker } from '../../src/broker/index.js';
import { KubeletCgroups, kubeCgroupsProblem } from '../../src/cli/kube-cgroups.js';
import { checkX509Svid } from '../../src/spiffe/index.js';
import { startCaEnv, TD, waitForIndex, type CaEnv } from '../ca/support/ca-env.js';
import { makePluginCa, newCsr, opensslVerifyChain, tempDir, writeCacerts, type PluginCa } from '../ca/support/pki-fixtures.js';
import { containerCgroup } from '../broker/support/python-workload.js';
import { eventually } from '../broker/support/eventually.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack } from '../broker/support/stack.js';
import { grpcGo, grpcGoBinary, grpcGoMissing, spawnGrpcGo, type GoSvidResponse } from '../support/grpc-go.js';
import { opensslMissing } from '../support/tools.js';

const skip = grpcGoMissing();
const CA_SERVICE = 'istio.v1.auth.IstioCertificateService';
const SLEEP = `spiffe://${TD}/ns/default/sa/sleep`;

interface CaCreate {
  code: string;
  message?: string;
  cert_chain?: string[];
  content_type?: string[];
  error_code?: string[];
}
interface Health {
  check: { code: string; status?: string };
  watch: { code: string; status?: string; message?: string };
}
interface Reflection {
  code: string;
  message?: string;
  services?: string[];
  file?: string;
  imports?: string[];
  methods?: Array<{ name: string; input: string; output: string; input_fields: string[]; server_streaming: boolean }>;
  link_error?: string;
}
interface Streamed {
  code: string;
  message?: string;
  error_info?: Array<{ reason: string; domain: string }>;
  responses?: GoSvidResponse[];
  bundles?: Array<Record<string, number>>;
}

describe('grpc-go against the CA (each transport)', { skip }, () => {
  let env: CaEnv;
  let work: { path: string; remove: () => Promise<void> };
  let plugin: PluginCa;
  const cas = new Map<string, CaServer>();

  before(async () => {
    work = await tempDir('ca-go-');
    const binary = grpcGoBinary();
    binary.catch(() => undefined); // awaited below; a build failure fails before()
    env = await startCaEnv();
    await env.createPod({ namespace: 'istio-system', name: 'ztunnel-a', serviceAccount: 'ztunnel', node: 'node-a' });
    await env.createPod({ namespace: 'default', name: 'sleep-a', serviceAccount: 'sleep', node: 'node-a' });
    // A plug-in CA (root -> intermediate): the chain has a leaf, an intermediate and the root.
    plugin = await makePluginCa('GoInterop');
    await mkdir(join(work.path, 'cacerts'));
    await writeCacerts(join(work.path, 'cacerts'), plugin);
    const signer = { kind: 'cacerts' as const, dir: join(work.path, 'cacerts') };
    // No transport: the default with TLS (h2, certbroker's engine); then node:http2 and grpc-js.
    cas.set('h2 (default)', await env.startCa({ signer }));
    cas.set('http2', await env.startCa({ signer, transport: 'http2' }));
    cas.set('grpc-js', await env.startCa({ signer, transport: 'grpc-js' }));
    const first = cas.get('h2 (default)')!;
    await waitForIndex(first, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
    for (const ca of cas.values()) await waitForIndex(ca, (i) => i.getPod({ namespace: 'default', name: 'sleep-a' }) !== undefined);
    await writeFile(join(work.path, 'roots.pem'), first.rootsPem());
    await writeFile(join(work.path, 'csr.pem'), await newCsr());
    await binary;
  });

  after(async () => {
    await env?.close();
    await work?.remove();
  });

  const tls = (ca: CaServer) => ['-target', `127.0.0.1:${ca.port}`, '-roots', join(work.path, 'roots.pem'), '-server-name', 'localhost'];

  async function create(ca: CaServer, o: { token: string; impersonate?: string; ttl?: number; clusterId?: string; raw?: string; csr?: string }): Promise<CaCreate> {
    const tokenFile = join(work.path, `token-${ca.port}`);
    await writeFile(tokenFile, o.token);
    let csrFile = join(work.path, 'csr.pem');
    if (o.csr !== undefined) {
      csrFile = join(work.path, `csr-${ca.port}.pem`);
      await writeFile(csrFile, o.csr);
    }
    return grpcGo<CaCreate>([
      'ca-create', ...tls(ca), '-token-file', tokenFile, '-csr-file', csrFile,
      ...(o.ttl !== undefined ? ['-ttl', String(o.ttl)] : []),
      ...(o.impersonate ? ['-impersonate', o.impersonate] : []),
      ...(o.clusterId ? ['-cluster-id', o.clusterId] : []),
      ...(o.raw ? ['-raw-request', o.raw] : []),
    ]);
  }

  for (const kind of ['h2 (default)', 'http2', 'grpc-js']) {
    it(`${kind}: ztunnel's token with ImpersonatedIdentity and clusterid is issued sleep's SVID; the chain is leaf, intermediate, root`, async () => {
      const ca = cas.get(kind)!;
      const token = await env.token({ namespace: 'istio-system', serviceAccount: 'ztunnel', pod: 'ztunnel-a' });
      const res = await create(ca, { token, impersonate: SLEEP, ttl: 7200, clusterId: 'Kubernetes' });
      assert.equal(res.code, 'OK', JSON.stringify(res));
      // gRPC over HTTP/2: application/grpc, optionally +proto (grpc-js answers with +proto).
      assert.equal(res.content_type?.length, 1);
      assert.match(res.content_type![0]!, /^application\/grpc(\+proto)?$/, 'the response content-type grpc-go saw');
      const chain = res.cert_chain!;
      assert.equal(chain.length, 3);
      const [leaf, inter, root] = chain.map((p) => new X509Certificate(p)) as [X509Certificate, X509Certificate, X509Certificate];
      assert.equal(leaf.ca, false);
      assert.equal(checkX509Svid(chain[0]!)?.id, SLEEP, 'the SPIFFE URI SAN is the impersonated identity');
      assert.equal(Date.parse(leaf.validTo) - Date.parse(leaf.validFrom), 7200_000 + 120_000, 'validity_duration honoured (plus the backdating)');
      assert.equal(chain[1], plugin.intermediate.pem);
      assert.equal(chain[2], ca.rootsPem());
      assert.ok(leaf.checkIssued(inter) && leaf.verify(inter.publicKey));
      assert.ok(inter.checkIssued(root) && inter.verify(root.publicKey));
      if (!opensslMissing()) assert.match(await opensslVerifyChain(chain), /OK/);
    });

    it(`${kind}: a bad token is UNAUTHENTICATED; an unparsable CSR, a TTL over the maximum and undecodable request bytes are INVALID_ARGUMENT`, async () => {
      const ca = cas.get(kind)!;
      const bad = await create(ca, { token: 'not-a-token' });
      assert.equal(bad.code, 'Unauthenticated', JSON.stringify(bad));
      assert.equal(bad.message, 'authentication failed');
      assert.equal(bad.cert_chain, undefined);
      const token = await env.token({ namespace: 'default', serviceAccount: 'sleep', pod: 'sleep-a' });
      const csr = await create(ca, { token, csr: 'not a csr' });
      assert.equal(csr.code, 'InvalidArgument', JSON.stringify(csr));
      assert.match(csr.error_code?.[0] ?? '', /^ERR_PKI_(PEM|CSR)_/);
      const long = await create(ca, { token, ttl: 365 * 86_400 });
      assert.equal(long.code, 'InvalidArgument', JSON.stringify(long));
      assert.deepEqual(long.error_code, ['ERR_CA_TTL_OVER_MAX']);
      // Field 1 (csr) declared 0x7f bytes long with none following: not a protobuf message.
      const garbage = await create(ca, { token, raw: '0a7f' });
      assert.equal(garbage.code, 'InvalidArgument', JSON.stringify(garbage));
      assert.deepEqual(garbage.error_code, ['ERR_CA_REQUEST_MALFORMED']);
    });

    it(`${kind}: health Check and Watch say SERVING (the server and the CA service); reflection v1alpha and v1 list the CA service and link its file with protodesc`, async () => {
      const ca = cas.get(kind)!;
      for (const service of ['', CA_SERVICE]) {
        const h = await grpcGo<Health>(['health', ...tls(ca), '-service', service]);
        assert.deepEqual(h, { check: { code: 'OK', status: 'SERVING' }, watch: { code: 'OK', status: 'SERVING' } }, `service '${service}'`);
      }
      const unknown = await grpcGo<Health>(['health', ...tls(ca), '-service', 'no.such.Service']);
      assert.equal(unknown.check.code, 'NotFound', JSON.stringify(unknown));
      assert.deepEqual(unknown.watch, { code: 'OK', status: 'SERVICE_UNKNOWN' }, 'Watch answers SERVICE_UNKNOWN (grpc.health.v1)');
      for (const version of ['v1alpha', 'v1']) {
        const r = await grpcGo<Reflection>(['reflection', ...tls(ca), '-version', version, '-symbol', CA_SERVICE]);
        assert.equal(r.code, 'OK', JSON.stringify(r));
        assert.ok(r.services?.includes(CA_SERVICE), `${version}: ${JSON.stringify(r.services)}`);
        assert.ok(r.services?.includes('grpc.health.v1.Health'), `${version}: ${JSON.stringify(r.services)}`);
        assert.equal(r.link_error, undefined, `${version}: protodesc links the files the server sent`);
        assert.equal(r.file, 'istio/v1/auth/ca.proto');
        assert.deepEqual(r.imports, ['google/protobuf/struct.proto']);
        assert.deepEqual(r.methods, [{
          name: 'CreateCertificate',
          input: 'istio.v1.auth.IstioCertificateRequest',
          output: 'istio.v1.auth.IstioCertificateResponse',
          input_fields: ['1:csr:string', '3:validity_duration:int64', '4:metadata:google.protobuf.Struct'],
          server_streaming: false,
        }]);
      }
    });
  }
});

const cgroups = KubeletCgroups.v2();
const cgroupsProblem = kubeCgroupsProblem(cgroups, 'cgroup v2');

describe('grpc-go against the node broker: SPIFFE Workload API and Broker API', { skip }, () => {
  const CART = `spiffe://${TD}/ns/shop/sa/cart`;
  let stack: Stack;
  let broker: Broker;
  let cartUid: string;
  let workloadSocket: string;
  let files: string;

  before(async () => {
    const binary = grpcGoBinary();
    binary.catch(() => undefined);
    stack = await Stack.start({ tmpPrefix: 'grpc-go-broker-', namespaces: ['shop'], serviceAccounts: ['shop/cart'] });
    workloadSocket = join(stack.dir, 'workload-api', 'socket');
    broker = await startBroker({ ...stack.brokerConfig({ name: 'go' }), workloadApiSocketPath: workloadSocket });
    await broker.whenReady(AbortSignal.timeout(20_000));
    cartUid = await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    await eventually('cart identity ready', () => broker.certs.current(CART));
    // ztunnel's own SVID, from the CA: the Broker API's allowed caller.
    const ztunnel = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    files = join(stack.dir, 'grpc-go-files');
    await mkdir(files);
    await writeFile(join(files, 'roots.pem'), stack.ca.rootsPem());
    await writeFile(join(files, 'ztunnel.pem'), ztunnel.certChainPem);
    await writeFile(join(files, 'ztunnel-key.pem'), ztunnel.privateKeyPem.reveal(), { mode: 0o600 });
    await binary;
  });

  after(async () => {
    cgroups?.cleanup();
    await broker?.stop(500);
    await stack?.close();
  });

  /** A workload-fetch run from inside a container cgroup of cart-0. */
  async function fetchAsCart(extra: string[]): Promise<Streamed> {
    const w = await spawnGrpcGo(['workload-fetch', '-target', `unix://${workloadSocket}`, ...extra]);
    cgroups!.place(w.child.pid!, containerCgroup(cartUid));
    w.go();
    return (await w.result()) as Streamed;
  }

  it('Workload API: FetchX509SVID with workload.spiffe.io is answered with the pod\'s SVID (key, chain and bundle check out in crypto/x509); FetchX509Bundles with the trust domain\'s bundle', { skip: cgroupsProblem }, async () => {
    const res = await fetchAsCart([]);
    assert.equal(res.code, 'OK', JSON.stringify(res));
    assert.equal(res.responses?.length, 1);
    const [svid] = res.responses![0]!.svids;
    assert.equal(res.responses![0]!.svids.length, 1);
    assert.equal(svid!.spiffe_id, CART);
    assert.deepEqual(svid!.leaf_uris, [CART]);
    assert.ok(svid!.cert_ders >= 1, JSON.stringify(svid));
    assert.equal(svid!.key_matches, true, 'x509_svid_key is the PKCS#8 key of the leaf');
    assert.ok(svid!.bundle_certs >= 1);
    assert.equal(svid!.verified, 'ok', 'the leaf verifies against the bundle');
    assert.equal(checkX509Svid(svid!.leaf_pem)?.id, CART);
    const bundles = await fetchAsCart(['-bundles']);
    assert.equal(bundles.code, 'OK', JSON.stringify(bundles));
    assert.deepEqual(Object.keys(bundles.bundles![0]!), [`spiffe://${TD}`]);
    assert.ok(bundles.bundles![0]![`spiffe://${TD}`]! >= 1);
  });

  it('Workload API: without the workload.spiffe.io header the call is refused with InvalidArgument (SPIFFE Workload API spec)', { skip: cgroupsProblem }, async () => {
    const res = await fetchAsCart(['-no-header']);
    assert.equal(res.code, 'InvalidArgument', JSON.stringify(res));
    assert.equal(res.responses, undefined);
    const bundles = await fetchAsCart(['-no-header', '-bundles']);
    assert.equal(bundles.code, 'InvalidArgument', JSON.stringify(bundles));
  });

  it('Workload API socket: health Check and Watch SERVING over the Unix socket', async () => {
    const h = await grpcGo<Health>(['health', '-plaintext', '-target', `unix://${workloadSocket}`]);
    assert.deepEqual(h, { check: { code: 'OK', status: 'SERVING' }, watch: { code: 'OK', status: 'SERVING' } });
  });

  const brokerArgs = () => [
    '-target', `unix://${broker.brokerSocketPath}`, '-roots', join(files, 'roots.pem'),
    '-cert', join(files, 'ztunnel.pem'), '-key', join(files, 'ztunnel-key.pem'), '-server-id', broker.ownIdentity,
  ];

  it('Broker API (mTLS over the socket, as ztunnel): SubscribeToX509SVID by pod UID and by name is the pod\'s SVID; SubscribeToX509Bundles the trust domain\'s bundle', async () => {
    for (const ref of [['-uid', cartUid], ['-namespace', 'shop', '-name', 'cart-0']]) {
      const res = await grpcGo<Streamed>(['broker-subscribe', ...brokerArgs(), ...ref]);
      assert.equal(res.code, 'OK', JSON.stringify(res));
      const svids = res.responses![0]!.svids;
      assert.equal(svids.length, 1);
      assert.equal(svids[0]!.spiffe_id, CART);
      assert.deepEqual(svids[0]!.leaf_uris, [CART]);
      assert.equal(svids[0]!.key_matches, true);
      assert.equal(svids[0]!.verified, 'ok');
    }
    // go-spiffe's / ztunnel#1936's package for the reference.
    const legacy = await grpcGo<Streamed>(['broker-subscribe', ...brokerArgs(), '-uid', cartUid, '-type-url', 'type.googleapis.com/spiffe.reference.KubernetesObjectReference']);
    assert.equal(legacy.responses?.[0]?.svids[0]?.spiffe_id, CART, JSON.stringify(legacy));
    const bundles = await grpcGo<Streamed>(['broker-subscribe', ...brokerArgs(), '-uid', cartUid, '-bundles']);
    assert.equal(bundles.code, 'OK', JSON.stringify(bundles));
    assert.deepEqual(Object.keys(bundles.bundles![0]!), [`spiffe://${TD}`]);
  });

  it('Broker API: refusals carry google.rpc.ErrorInfo that grpc-go decodes (unknown pod NOT_FOUND WORKLOAD_NOT_FOUND; no broker.spiffe.io header INVALID_ARGUMENT)', async () => {
    const ghost = await grpcGo<Streamed>(['broker-subscribe', ...brokerArgs(), '-namespace', 'shop', '-name', 'ghost']);
    assert.equal(ghost.code, 'NotFound', JSON.stringify(ghost));
    assert.deepEqual(ghost.error_info?.map((e) => [e.reason, e.domain]), [['WORKLOAD_NOT_FOUND', 'spiffe.io']]);
    const noHeader = await grpcGo<Streamed>(['broker-subscribe', ...brokerArgs(), '-uid', cartUid, '-no-header']);
    assert.equal(noHeader.code, 'InvalidArgument', JSON.stringify(noHeader));
    assert.deepEqual(noHeader.error_info?.map((e) => [e.reason, e.domain]), [['MISSING_BROKER_HEADER', 'certbroker']]);
  });
});
