/**
 * Broker API compatibility end to end: the workload reference packed with the type URL of the
 * final SPIFFE Broker API (`spiffe.broker.*`) and of go-spiffe / ztunnel#1936
 * (`spiffe.reference.*`), as a KubernetesObjectReference or a WorkloadPIDReference; by a grpc-js
 * client (certbroker's BrokerClient) and by Python grpcio with classes generated from the protos
 * of each package (so each packs its own package's type URL). PID references name real processes
 * placed in real cgroups laid out as kubelet lays them out (root, cgroup v2); the broker resolves
 * them from /proc as in production. The per-kind caller allow-lists and their ErrorInfo.
 */
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import { BrokerClient, firstMessage, startBroker, type Broker } from '../../src/broker/index.js';
import { protoRootFor } from '../../src/grpc/index.js';
import { decodeRpcStatus } from '../../src/grpc/rpc-status.js';
import { KubeletCgroups, kubeCgroupsProblem, podPath } from '../../src/cli/kube-cgroups.js';
import { TEST_PYTHON, pythonGrpcMissing, writePythonGrpcStubs } from '../support/tools.js';
import { BROKER_NS, CONSUMER_SA, NODE, Stack, TD, type Svid } from './support/stack.js';
import { eventually } from './support/eventually.js';

const run = promisify(execFile);
const PY_CLIENT = [
  fileURLToPath(new URL('./support/broker_api_client.py', import.meta.url)),
  fileURLToPath(new URL('../../../test/broker/support/broker_api_client.py', import.meta.url)),
].find((p) => existsSync(p))!;

const K8S_URLS = ['type.googleapis.com/spiffe.broker.KubernetesObjectReference', 'type.googleapis.com/spiffe.reference.KubernetesObjectReference'];
const PID_URLS = ['type.googleapis.com/spiffe.broker.WorkloadPIDReference', 'type.googleapis.com/spiffe.reference.WorkloadPIDReference'];
const cartId = `spiffe://${TD}/ns/shop/sa/cart`;
const OTHER_SA = 'mesh-agent';

const cgroups = KubeletCgroups.v2();
const cgroupsProblem = kubeCgroupsProblem(cgroups, 'cgroup v2');

interface Refusal {
  readonly code: number;
  readonly reason: string | undefined;
  readonly domain: string | undefined;
}

async function refusal(stream: ReturnType<BrokerClient['subscribeX509Svid']>): Promise<Refusal> {
  try {
    await firstMessage(stream);
  } catch (err) {
    const e = err as ServiceError;
    const bin = e.metadata?.get('grpc-status-details-bin')[0];
    const info = bin instanceof Buffer ? decodeRpcStatus(bin).errorInfo : undefined;
    return { code: e.code, reason: info?.reason, domain: info?.domain };
  }
  stream.cancel();
  throw new Error('the stream was served');
}

describe('Broker API references: both packages, Kubernetes and PID, per-kind callers', () => {
  let stack: Stack;
  let broker: Broker;
  let ztunnel: BrokerClient;
  let other: BrokerClient;
  let otherSvid: Svid;
  let ztunnelSvid: Svid;
  let cartUid: string;
  let stubs: string;
  const children = new Set<ChildProcess>();

  const clientFor = (svid: Svid) =>
    new BrokerClient({ socketPath: broker.brokerSocketPath, rootsPem: stack.ca.rootsPem(), certChainPem: svid.certChainPem, privateKeyPem: svid.privateKeyPem, trustDomain: TD });

  /** A process of pod `uid` (a container of it, as containerd names it), like a workload's own. */
  function processInPod(uid: string): number {
    const child = spawn('sleep', ['120'], { stdio: 'ignore' });
    children.add(child);
    child.on('exit', () => children.delete(child));
    cgroups!.place(child.pid!, podPath({ driver: 'systemd', qos: 'besteffort', uid, container: { runtime: 'containerd', id: randomBytes(32).toString('hex') } }));
    return child.pid!;
  }

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'broker-refs-', namespaces: ['shop'], serviceAccounts: ['shop/cart', `${BROKER_NS}/${OTHER_SA}`] });
    const consumer = `spiffe://${TD}/ns/${BROKER_NS}/sa/${CONSUMER_SA}`;
    const agent = `spiffe://${TD}/ns/${BROKER_NS}/sa/${OTHER_SA}`;
    broker = await startBroker({
      ...stack.brokerConfig({}),
      allowedCallers: [consumer, agent],
      // The other agent may name pods, not processes.
      referenceCallers: { kubernetes: [consumer, agent], pid: [consumer] },
    });
    await broker.whenReady(AbortSignal.timeout(20_000));
    cartUid = await stack.createPod({ namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: NODE });
    await eventually('cart identity ready', () => broker.certs.current(cartId));
    ztunnelSvid = await stack.ownSvid(BROKER_NS, CONSUMER_SA);
    otherSvid = await stack.ownSvid(BROKER_NS, OTHER_SA);
    ztunnel = clientFor(ztunnelSvid);
    other = clientFor(otherSvid);
  });

  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    cgroups?.cleanup();
    ztunnel?.close();
    other?.close();
    await broker?.stop(500);
    await stack?.close();
  });

  it('grpc-js: a KubernetesObjectReference with either type URL (by UID, by name) is served the pod\'s SVID, and its bundles', async () => {
    for (const typeUrl of K8S_URLS) {
      for (const ref of [{ uid: cartUid }, { namespace: 'shop', name: 'cart-0' }]) {
        const stream = ztunnel.subscribeX509Svid(ref, { typeUrl });
        assert.equal((await firstMessage(stream)).svids[0]!.spiffe_id, cartId, `${typeUrl} ${JSON.stringify(ref)}`);
        stream.cancel();
      }
      const bundles = ztunnel.subscribeX509Bundles({ uid: cartUid }, { typeUrl });
      assert.deepEqual(Object.keys((await firstMessage(bundles)).bundles), [`spiffe://${TD}`]);
      bundles.cancel();
    }
  });

  it('an unknown type URL, or a PID reference with pid 0, is INVALID_ARGUMENT (WORKLOAD_REFERENCE_INVALID)', async () => {
    const bad = await refusal(ztunnel.subscribeX509Svid({ uid: cartUid }, { typeUrl: 'type.googleapis.com/spiffe.workload.KubernetesObjectReference' }));
    assert.deepEqual(bad, { code: GrpcStatus.INVALID_ARGUMENT, reason: 'WORKLOAD_REFERENCE_INVALID', domain: 'spiffe.io' });
    const zero = await refusal(ztunnel.subscribeX509Svid({ pid: 0 }, { typeUrl: PID_URLS[1]! }));
    assert.deepEqual(zero, { code: GrpcStatus.INVALID_ARGUMENT, reason: 'WORKLOAD_REFERENCE_INVALID', domain: 'spiffe.io' }, 'pid must be positive');
  });

  it('grpc-js: a WorkloadPIDReference with either type URL names a process in a pod cgroup -> that pod\'s SVID; a process in no pod or in another node\'s pod is NOT_FOUND; in a pod here without an identity PERMISSION_DENIED', { skip: cgroupsProblem }, async () => {
    const pid = processInPod(cartUid);
    for (const typeUrl of PID_URLS) {
      const stream = ztunnel.subscribeX509Svid({ pid }, { typeUrl });
      assert.equal((await firstMessage(stream)).svids[0]!.spiffe_id, cartId, typeUrl);
      stream.cancel();
      // ztunnel#1936 names its own process for the bundles.
      const bundles = ztunnel.subscribeX509Bundles({ pid }, { typeUrl });
      assert.deepEqual(Object.keys((await firstMessage(bundles)).bundles), [`spiffe://${TD}`]);
      bundles.cancel();
    }
    assert.deepEqual(await refusal(ztunnel.subscribeX509Svid({ pid: process.pid })), { code: GrpcStatus.NOT_FOUND, reason: 'WORKLOAD_NOT_FOUND', domain: 'spiffe.io' }, 'the test runner is in no pod');
    const stranger = processInPod(randomUUID());
    assert.deepEqual(await refusal(ztunnel.subscribeX509Svid({ pid: stranger }, { typeUrl: PID_URLS[1]! })), { code: GrpcStatus.NOT_FOUND, reason: 'WORKLOAD_NOT_FOUND', domain: 'spiffe.io' });
    const hostUid = await stack.createPod({ namespace: 'shop', name: 'cart-host', serviceAccount: 'cart', nodeName: NODE, hostNetwork: true });
    await eventually('host-network pod seen', () => broker.pods.ineligibleByUid(hostUid));
    assert.deepEqual(
      await refusal(ztunnel.subscribeX509Svid({ pid: processInPod(hostUid) }, { typeUrl: PID_URLS[1]! })),
      { code: GrpcStatus.PERMISSION_DENIED, reason: 'WORKLOAD_NOT_ENTITLED', domain: 'spiffe.io' },
    );
  });

  it('per-kind callers: an agent allowed Kubernetes references only is refused a PID reference (PERMISSION_DENIED, REFERENCE_TYPE_NOT_ALLOWED) and served a pod reference', async () => {
    for (const typeUrl of PID_URLS) {
      assert.deepEqual(await refusal(other.subscribeX509Svid({ pid: 1 }, { typeUrl })), { code: GrpcStatus.PERMISSION_DENIED, reason: 'REFERENCE_TYPE_NOT_ALLOWED', domain: 'certbroker' });
    }
    const stream = other.subscribeX509Svid({ uid: cartUid }, { typeUrl: K8S_URLS[1]! });
    assert.equal((await firstMessage(stream)).svids[0]!.spiffe_id, cartId);
    stream.cancel();
  });

  it('python grpcio packs each package\'s own messages (Kubernetes and PID) and is served; the refusal carries its ErrorInfo', { skip: pythonGrpcMissing() }, async () => {
    stubs = join(stack.dir, 'py');
    await mkdir(stubs, { recursive: true });
    const root = protoRootFor('spiffe/broker/broker.proto');
    await writePythonGrpcStubs(root, stubs, ['spiffe/broker/broker.proto', 'spiffe/reference/reference.proto', 'google/rpc/status.proto', 'google/rpc/error_details.proto']);
    const files = async (svid: Svid, name: string) => {
      await writeFile(join(stubs, `${name}-cert.pem`), svid.certChainPem);
      await writeFile(join(stubs, `${name}-key.pem`), svid.privateKeyPem.reveal(), { mode: 0o600 });
    };
    await writeFile(join(stubs, 'roots.pem'), stack.ca.rootsPem());
    await files(ztunnelSvid, 'ztunnel');
    await files(otherSvid, 'other');
    const py = async (who: string, rpc: 'svid' | 'bundles', kind: 'k8s' | 'pid', pkg: 'broker' | 'reference', pid = 0) => {
      const { stdout } = await run(TEST_PYTHON, [
        PY_CLIENT, stubs, broker.brokerSocketPath, join(stubs, 'roots.pem'), join(stubs, `${who}-cert.pem`), join(stubs, `${who}-key.pem`),
        broker.ownIdentity, rpc, kind === 'k8s' ? cartUid : '', '', '', '1', kind, pkg, String(pid),
      ]);
      return JSON.parse(stdout) as { spiffe_id?: string; bundles?: string[]; code?: string; status?: { error_info: Array<{ reason: string; domain: string }> } };
    };
    for (const pkg of ['broker', 'reference'] as const) {
      assert.equal((await py('ztunnel', 'svid', 'k8s', pkg)).spiffe_id, cartId, `k8s ${pkg}`);
    }
    if (!cgroupsProblem) {
      const pid = processInPod(cartUid);
      for (const pkg of ['broker', 'reference'] as const) assert.equal((await py('ztunnel', 'svid', 'pid', pkg, pid)).spiffe_id, cartId, `pid ${pkg}`);
      assert.deepEqual((await py('ztunnel', 'bundles', 'pid', 'reference', pid)).bundles, [`spiffe://${TD}`]);
    }
    const denied = await py('other', 'svid', 'pid', 'reference', 1);
    assert.equal(denied.code, 'PERMISSION_DENIED', JSON.stringify(denied));
    assert.deepEqual(denied.status?.error_info.map((i) => [i.reason, i.domain]), [['REFERENCE_TYPE_NOT_ALLOWED', 'certbroker']]);
  });
});
