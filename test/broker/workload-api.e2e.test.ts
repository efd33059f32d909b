/**
 * The SPIFFE Workload API end to end: the real broker (devcluster over HTTPS, the CA over TLS)
 * serving its Workload API socket; each caller a real Python grpcio process (stubs generated now
 * from proto/spiffe/workload/workload.proto) placed in a real kubelet-style pod cgroup before it
 * connects. Root only (cgroups); time moves by SkipClock for the rotation.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client, credentials, Metadata } from '@grpc/grpc-js';
import { type Broker, splitDerCertificates, startBroker } from '../../src/broker/index.js';
import { healthServiceDefinition } from '../../src/grpc/index.js';
import { typedMethod } from '../../src/grpc/typed-methods.js';
import { certificateToPem, createRootCa } from '../../src/pki/index.js';
import { KubeletCgroups, kubeCgroupsProblem } from '../../src/cli/kube-cgroups.js';
import { fileContainingSymbol, linkProblems, listServices, reflectionClient } from '../support/grpc-reflection.js';
import { SkipClock } from '../support/skip-clock.js';
import { opensslMissing, pythonGrpcMissing } from '../support/tools.js';
import { eventually } from './support/eventually.js';
import { containerCgroup, generatePythonStubs, PythonWorkloads, type WorkloadOptions } from './support/python-workload.js';
import { NODE, Stack, TD } from './support/stack.js';

const run = promisify(execFile);
const HOUR = 3600_000;
const CART = `spiffe://${TD}/ns/shop/sa/cart`;

const cgroups = KubeletCgroups.v2();
const skip = kubeCgroupsProblem(cgroups, 'cgroup v2') ?? pythonGrpcMissing() ?? opensslMissing();

describe('SPIFFE Workload API: real processes in kubelet-style pod cgroups, a Python grpcio client', { skip }, () => {
  let stack: Stack;
  let clock: SkipClock;
  let broker: Broker;
  let workloads: PythonWorkloads;
  const uids: Record<string, string> = {};

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'wlapi-e2e-', namespaces: ['shop'], serviceAccounts: ['shop/cart', 'shop/web', 'shop/hostnet'] });
    clock = new SkipClock();
    const socketPath = join(stack.dir, 'workload-api', 'socket');
    broker = await startBroker({ ...stack.brokerConfig({ clock, name: 'wl' }), workloadApiSocketPath: socketPath });
    await broker.whenReady(AbortSignal.timeout(20_000));
    for (const [name, sa, hostNetwork] of [['cart-0', 'cart', false], ['cart-1', 'cart', false], ['web-0', 'web', false], ['hostnet-0', 'hostnet', true]] as const) {
      uids[name] = await stack.createPod({ namespace: 'shop', name, serviceAccount: sa, nodeName: NODE, hostNetwork });
    }
    uids['remote-0'] = await stack.createPod({ namespace: 'shop', name: 'remote-0', serviceAccount: 'cart', nodeName: 'node-2' });
    await eventually('pods tracked', () => broker.pods.byUid(uids['cart-1']!) && broker.pods.byUid(uids['web-0']!) && broker.pods.ineligibleByUid(uids['hostnet-0']!));
    const stubs = join(stack.dir, 'py');
    await generatePythonStubs(stubs);
    workloads = new PythonWorkloads(cgroups!, stubs, `unix://${socketPath}`);
  });

  after(async () => {
    await workloads?.killAll();
    cgroups?.cleanup();
    await broker?.stop(500);
    await stack?.close();
  });

  const workload = (rpc: string, options: WorkloadOptions = {}) => workloads.start(rpc, options);

  it('the socket any workload may connect to: 0666 in a 0755 directory', async () => {
    const sock = await stat(broker.workloadApiSocketPath!);
    assert.ok(sock.isSocket());
    assert.equal(sock.mode & 0o777, 0o666);
    assert.equal((await stat(join(stack.dir, 'workload-api'))).mode & 0o777, 0o755);
  });

  it("a process in a pod's container cgroup gets its service account's SVID: chain to the root, URI SAN = the SPIFFE ID (openssl)", async () => {
    const msg = await workload('x509svid', { cgroup: containerCgroup(uids['cart-0']!) }).line(0);
    assert.equal(msg.code, undefined, JSON.stringify(msg));
    assert.equal(msg.svids.length, 1);
    const svid = msg.svids[0]!;
    assert.equal(svid.spiffe_id, CART);
    assert.equal(svid.hint, '');
    assert.deepEqual(msg.federated_bundles, {});
    const dir = join(stack.dir, 'openssl-cart');
    await mkdir(dir, { recursive: true });
    const chain = splitDerCertificates(Buffer.from(svid.x509_svid, 'base64'));
    const roots = splitDerCertificates(Buffer.from(svid.bundle, 'base64'));
    await writeFile(join(dir, 'leaf.pem'), certificateToPem(chain[0]!));
    await writeFile(join(dir, 'chain.pem'), chain.slice(1).map((d) => certificateToPem(d)).join(''));
    await writeFile(join(dir, 'bundle.pem'), roots.map((d) => certificateToPem(d)).join(''));
    await writeFile(join(dir, 'key.der'), Buffer.from(svid.x509_svid_key, 'base64'), { mode: 0o600 });
    const verifyArgs = ['verify', '-CAfile', join(dir, 'bundle.pem'), ...(chain.length > 1 ? ['-untrusted', join(dir, 'chain.pem')] : []), join(dir, 'leaf.pem')];
    assert.match((await run('openssl', verifyArgs)).stdout, /leaf\.pem: OK/);
    const san = (await run('openssl', ['x509', '-in', join(dir, 'leaf.pem'), '-noout', '-ext', 'subjectAltName'])).stdout;
    assert.match(san, new RegExp(`URI:${CART.replaceAll('/', '\\/')}\\s*$`, 'm'));
    const certKey = (await run('openssl', ['x509', '-in', join(dir, 'leaf.pem'), '-noout', '-pubkey'])).stdout;
    const keyPub = (await run('openssl', ['pkey', '-inform', 'DER', '-in', join(dir, 'key.der'), '-pubout'])).stdout;
    assert.equal(keyPub, certKey, 'the PKCS#8 key is the leaf\'s');
    assert.equal(roots.map((d) => certificateToPem(d)).join(''), stack.ca.rootsPem().replace(/\r/g, ''), 'the bundle is the mesh root');
  });

  it('two pods of one service account get the same certificate and key from the shared cache (no second CA call)', async () => {
    await eventually('cart cached', () => broker.certs.current(CART));
    const calls = broker.certs.caCalls;
    const a = await workload('x509svid', { cgroup: containerCgroup(uids['cart-0']!) }).line(0);
    const b = await workload('x509svid', { cgroup: containerCgroup(uids['cart-1']!) }).line(0);
    assert.equal(a.svids[0]!.spiffe_id, CART);
    assert.equal(b.svids[0]!.x509_svid, a.svids[0]!.x509_svid);
    assert.equal(b.svids[0]!.x509_svid_key, a.svids[0]!.x509_svid_key);
    assert.equal(broker.certs.caCalls, calls, 'served from the cache');
    const web = await workload('x509svid', { cgroup: containerCgroup(uids['web-0']!) }).line(0);
    assert.equal(web.svids[0]!.spiffe_id, `spiffe://${TD}/ns/shop/sa/web`, 'another service account, another identity');
  });

  it('PERMISSION_DENIED for a caller with no identity: no pod cgroup, a host-network pod, a pod of another node, an unknown pod', async () => {
    const cases = {
      host: undefined,
      hostnet: containerCgroup(uids['hostnet-0']!),
      remote: containerCgroup(uids['remote-0']!),
      unknown: containerCgroup(randomUUID()),
    };
    for (const [name, cgroup] of Object.entries(cases)) {
      for (const rpc of ['x509svid', 'x509bundles']) {
        const out = await workload(rpc, cgroup ? { cgroup } : {}).line(0);
        assert.equal(out.code, 'PERMISSION_DENIED', `${name} ${rpc}: ${JSON.stringify(out)}`);
      }
    }
    const hostnet = await workload('x509svid', { cgroup: cases.hostnet }).line(0);
    assert.match(hostnet.details ?? '', /host-network/);
  });

  it('INVALID_ARGUMENT without the workload.spiffe.io header (before attestation); the JWT-SVID profile is UNIMPLEMENTED', async () => {
    const cart = () => ({ cgroup: containerCgroup(uids['cart-0']!) });
    for (const rpc of ['x509svid', 'x509bundles', 'jwtsvid', 'jwtbundles', 'validatejwt']) {
      const out = await workload(rpc, { ...cart(), header: false }).line(0);
      assert.equal(out.code, 'INVALID_ARGUMENT', `${rpc}: ${JSON.stringify(out)}`);
    }
    assert.equal((await workload('x509svid', { header: false }).line(0)).code, 'INVALID_ARGUMENT', 'a host process without the header too');
    for (const rpc of ['jwtsvid', 'jwtbundles', 'validatejwt']) {
      const out = await workload(rpc, cart()).line(0);
      assert.equal(out.code, 'UNIMPLEMENTED', `${rpc}: ${JSON.stringify(out)}`);
    }
  });

  it('FetchX509Bundles: the trust domain bundle keyed by its SPIFFE ID', async () => {
    const out = await workload('x509bundles', { cgroup: containerCgroup(uids['web-0']!) }).line(0);
    assert.deepEqual(Object.keys(out.bundles ?? {}), [`spiffe://${TD}`]);
    const roots = splitDerCertificates(Buffer.from(out.bundles![`spiffe://${TD}`]!, 'base64'));
    assert.equal(roots.map((d) => certificateToPem(d)).join(''), stack.ca.rootsPem().replace(/\r/g, ''));
  });

  it('rotation delivers a new message on the open stream; a caller moved to another pod is re-checked and refused', async () => {
    const w = workload('x509svid', { cgroup: containerCgroup(uids['cart-0']!), count: 2 });
    const first = await w.line(0);
    const mover = workload('x509svid', { cgroup: containerCgroup(uids['cart-1']!), count: 2 });
    assert.equal((await mover.line(0)).svids[0]!.spiffe_id, CART);
    // The process moves to web-0's cgroup: the stream's next message is preceded by a re-check.
    cgroups!.place(mover.child.pid!, containerCgroup(uids['web-0']!));
    const before = broker.certs.current(CART)!;
    clock.skip(0.56 * HOUR); // past half-life (+10 % jitter at most): the manager renews at the CA
    await eventually('renewed', () => (broker.certs.current(CART)?.serial !== before.serial ? true : undefined));
    const second = await w.line(1);
    assert.equal(second.svids[0]!.spiffe_id, CART);
    assert.notEqual(second.svids[0]!.x509_svid, first.svids[0]!.x509_svid, 'the new certificate');
    const moved = await mover.line(1);
    assert.equal(moved.code, 'PERMISSION_DENIED', JSON.stringify(moved));
    assert.match(moved.details ?? '', /pod-changed/);
  });

  it('gRPC health and reflection on the same socket (plain gRPC)', async () => {
    const target = `unix://${broker.workloadApiSocketPath}`;
    const check = typedMethod<{ service: string }, { status: string }>(healthServiceDefinition(), 'Check');
    const client = new Client(target, credentials.createInsecure());
    try {
      const status = await new Promise<string>((resolve, reject) =>
        client.makeUnaryRequest(check.path, check.requestSerialize, check.responseDeserialize, { service: 'SpiffeWorkloadAPI' }, new Metadata(), (err, res) =>
          err ? reject(err) : resolve(String(res!.status)),
        ),
      );
      assert.equal(status, 'SERVING');
    } finally {
      client.close();
    }
    const r = reflectionClient(target, credentials.createInsecure());
    try {
      const services = await listServices(r);
      assert.deepEqual([...services].sort(), ['SpiffeWorkloadAPI', 'grpc.health.v1.Health']);
      // The service by its real name (the proto has no package), its file and imports linkable as protoc would.
      const files = await fileContainingSymbol(r, 'SpiffeWorkloadAPI');
      assert.deepEqual(files.map((f) => f.name).sort(), ['google/protobuf/struct.proto', 'spiffe/workload/workload.proto']);
      assert.deepEqual(linkProblems(files), []);
      const svc = files.find((f) => f.name === 'spiffe/workload/workload.proto')!.service?.[0];
      assert.deepEqual(svc?.method?.map((m) => m.name), ['FetchX509SVID', 'FetchX509Bundles', 'FetchJWTSVID', 'FetchJWTBundles', 'ValidateJWTSVID']);
    } finally {
      r.close();
    }
  });

  it('the SO_PEERCRED helper killed: workloads are still served (the fallback, then a new helper) and the exit is counted', async () => {
    const helpers = () =>
      readdirSync('/proc')
        .filter((p) => /^\d+$/.test(p))
        .filter((p) => {
          try {
            const stat = readFileSync(`/proc/${p}/stat`, 'utf8');
            return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid && readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('NODE_HANDLE_ACK');
          } catch {
            return false;
          }
        })
        .map(Number);
    const [helper] = helpers();
    assert.ok(helper, 'the broker runs its helper');
    process.kill(helper, 'SIGKILL');
    await eventually('helper gone', () => (helpers().includes(helper) ? undefined : true));
    for (let i = 0; i < 3; i++) {
      const out = await workload('x509svid', { cgroup: containerCgroup(uids['cart-0']!) }).line(0);
      assert.equal(out.svids?.[0]?.spiffe_id, CART, JSON.stringify(out));
    }
    await eventually('a new helper', () => (helpers().some((p) => p !== helper) ? true : undefined));
    const out = await workload('x509svid', { cgroup: containerCgroup(uids['cart-1']!) }).line(0);
    assert.equal(out.svids?.[0]?.spiffe_id, CART, JSON.stringify(out));
    const text = await (await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`)).text();
    assert.match(text, /certbroker_broker_workload_api_peercred_helper_exits_total [1-9]/);
  });

  it('metrics: attestations by outcome, their latency, the SO_PEERCRED mode, open streams, refusals', async () => {
    const res = await fetch(`http://127.0.0.1:${broker.opsPort}/metrics`);
    const text = await res.text();
    assert.match(text, /certbroker_broker_workload_api_attestations_total\{outcome="attested"\} [1-9]/);
    assert.match(text, /certbroker_broker_workload_api_attestations_total\{outcome="not-in-pod"\} [1-9]/);
    assert.match(text, /certbroker_broker_workload_api_attestation_seconds_count [1-9]/);
    assert.match(text, /certbroker_broker_workload_api_peercred_mode\{mode="helper"\} 1/, 'SO_PEERCRED through the long-lived helper');
    assert.match(text, /certbroker_broker_workload_api_peercred_mode\{mode="batch"\} 0/);
    assert.match(text, /certbroker_broker_workload_api_streams_open\{rpc="x509svid"\} \d/);
    assert.match(text, /certbroker_broker_workload_api_first_message_seconds_count\{rpc="x509svid"\} [1-9]/);
    assert.match(text, /certbroker_broker_workload_api_rejections_total\{rpc="FetchX509SVID",code="ERR_CALLER_NOT_ATTESTED"\} [1-9]/);
  });

  it('a trust bundle change delivers a new message on both streams (full state: the new bundle)', async () => {
    const svid = workload('x509svid', { cgroup: containerCgroup(uids['cart-0']!), count: 2 });
    const bundles = workload('x509bundles', { cgroup: containerCgroup(uids['web-0']!), count: 2 });
    const before = await svid.line(0);
    assert.equal(splitDerCertificates(Buffer.from((await bundles.line(0)).bundles![`spiffe://${TD}`]!, 'base64')).length, 1);
    const extra = await createRootCa({ subject: 'CN=next mesh root', ttlSeconds: 3600 });
    assert.ok(broker.bundle.update([...broker.bundle.rootsDer, Buffer.from(extra.der)]));
    const svidAfter = await svid.line(1);
    assert.equal(svidAfter.svids[0]!.x509_svid, before.svids[0]!.x509_svid, 'the same SVID');
    assert.equal(splitDerCertificates(Buffer.from(svidAfter.svids[0]!.bundle, 'base64')).length, 2, 'with both roots');
    const bundlesAfter = await bundles.line(1);
    assert.equal(splitDerCertificates(Buffer.from(bundlesAfter.bundles![`spiffe://${TD}`]!, 'base64')).length, 2);
  });

  it('SIGTERM-style stop with a stream open: the stream ends UNAVAILABLE and the broker stops within its deadline (last: stops the broker)', async () => {
    const w = workload('x509svid', { cgroup: containerCgroup(uids['web-0']!), count: 2 });
    assert.equal((await w.line(0)).svids[0]!.spiffe_id, `spiffe://${TD}/ns/shop/sa/web`);
    const stopped = broker.stop(500).then(() => 'stopped');
    const limit = new Promise((resolve) => setTimeout(() => resolve('still running'), 10_000).unref());
    assert.equal(await Promise.race([stopped, limit]), 'stopped');
    const end = await w.line(1);
    assert.equal(end.code, 'UNAVAILABLE', JSON.stringify(end));
    assert.equal(existsSync(broker.workloadApiSocketPath!), false, 'the socket is removed');
  });
});
