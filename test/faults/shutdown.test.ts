/**
 * Fault suite — SIGTERM ends the process when a dependency hangs. Each case runs the real CLI
 * (dist/src/cli/main.js) against a dependency that accepts and never answers (a TCP server
 * that never starts TLS; a TLS server that completes the handshake and then stays silent; the
 * devcluster with a 10 min latency on every request; a CA root Secret that cannot be loaded),
 * sends SIGTERM once, and asserts that the process exited with the expected code and log line.
 * The 30 s wait is a guard against hanging, never a measured duration.
 *
 * Today's code (before this suite): the broker logged "node broker stopped" and stayed alive on
 * the CA connection grpc-js never gives up; `certbroker fetch` ignored SIGTERM the same way;
 * `certbroker ca` ignored the first SIGTERM while its root could not be loaded; install-cni
 * stayed alive on the abandoned upgrade-check request.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { tokenFor, Stack } from '../broker/support/stack.js';
import { CliProcess } from '../support/cli-process.js';
import { silentTlsMaterial, startHungServer, type HungServer, type TlsMaterial } from '../support/hung-server.js';
import { CONFORMANCE, DaemonProcess, makeHostTree, treeEnv, waitFor } from '../cni/install/host-tree.js';
import { until } from '../support/until.js';

const EXIT_BOUND_MS = 30_000;
const HANG_MS = 600_000;


describe('fault: SIGTERM with a hung dependency', () => {
  let stack: Stack;
  let dir: string;
  let material: TlsMaterial;
  const servers: HungServer[] = [];

  before(async () => {
    stack = await Stack.start({ tmpPrefix: 'fault-shutdown-', namespaces: ['shop'], serviceAccounts: ['shop/cart'] });
    dir = stack.dir;
    material = await silentTlsMaterial();
  });

  after(async () => {
    for (const s of servers) await s.close();
    await stack?.close();
  });

  /** A hung CA of either kind, and the root file a client must trust for it. */
  const hungCa = async (kind: 'tcp' | 'tls'): Promise<{ server: HungServer; rootFile: string }> => {
    const server = await startHungServer(kind === 'tls' ? { tls: material } : {});
    servers.push(server);
    const rootFile = join(dir, `hung-ca-root-${kind}.pem`);
    // For the TCP server any root will do: the handshake never starts.
    await writeFile(rootFile, kind === 'tls' ? material.caCertPem : stack.ca.rootsPem());
    return { server, rootFile };
  };

  /** `certbroker broker` for the stack's broker pod, with the CA at `caAddress` (default: the stack's). */
  const brokerProcess = async (name: string, ca: { readonly caAddress?: string; readonly rootFile?: string } = {}): Promise<CliProcess> => {
    const { env } = await stack.brokerEnv(`broker-${name}`, ca);
    return new CliProcess(['broker'], { ...env, LOG_LEVEL: 'info', ISTIO_CA_FRONT_ADDRESS: 'off', BROKER_SHUTDOWN_GRACE_SECONDS: '2' });
  };

  it('broker: exits 0 on SIGTERM while the API server hangs during its start', { timeout: 90_000 }, async () => {
    const baseline = stack.dc.openConnections;
    stack.dc.faults.setLatency(HANG_MS);
    const broker = await brokerProcess('hung-api');
    try {
      // Its TokenRequest and its first pod list wait on the API server.
      await until(() => stack.dc.openConnections >= baseline + 2, 'the broker waiting on the API server', { timeoutMs: 20_000 });
      broker.child.kill('SIGTERM');
      const exit = await broker.exit(EXIT_BOUND_MS);
      assert.ok(exit, `still running ${EXIT_BOUND_MS} ms after SIGTERM:\n${broker.tail()}`);
      assert.deepEqual(exit, { code: 0, signal: null }, broker.tail());
      assert.ok(broker.hasLog('node broker stopped before it finished starting'), broker.tail());
      assert.ok(!broker.hasLog('shutdown did not finish within its grace period; exiting now'), 'ended by itself, not by the hard exit');
    } finally {
      stack.dc.faults.clear();
      broker.kill();
    }
  });

  for (const kind of ['tcp', 'tls'] as const) {
    const what = kind === 'tcp' ? 'a CA that accepts and never answers' : 'a CA that completes TLS and goes silent';

    it(`broker: exits 0 on SIGTERM against ${what}`, { timeout: 90_000 }, async () => {
      const { server, rootFile } = await hungCa(kind);
      const broker = await brokerProcess(kind, { caAddress: server.address, rootFile });
      try {
        await broker.waitForLog('node broker started');
        // The own-SVID fetch has reached the hung CA.
        await until(() => server.openConnections >= 1, 'the broker connected to the hung CA', { timeoutMs: 20_000 });
        broker.child.kill('SIGTERM');
        const exit = await broker.exit(EXIT_BOUND_MS);
        assert.ok(exit, `still running ${EXIT_BOUND_MS} ms after SIGTERM:\n${broker.tail()}`);
        assert.deepEqual(exit, { code: 0, signal: null }, broker.tail());
        assert.ok(broker.hasLog('node broker stopped'), broker.tail());
        assert.ok(!broker.hasLog('shutdown did not finish within its grace period; exiting now'), 'ended by itself, not by the hard exit');
      } finally {
        broker.kill();
      }
    });

    it(`fetch: exits on SIGTERM while waiting for ${what}`, { timeout: 90_000 }, async () => {
      const { server, rootFile } = await hungCa(kind);
      const token = await tokenFor(stack.core, 'shop', 'cart', { audience: 'istio-ca', expirationSeconds: 3600 });
      const tokenFile = join(dir, `fetch-${kind}.token`);
      await writeFile(tokenFile, token.reveal(), { mode: 0o600 });
      const fetch = new CliProcess(
        ['fetch', '--token-file', tokenFile, '--ca-address', server.address, '--ca-root-cert-file', rootFile, '--ca-tls-server-name', 'localhost',
          '--socket', `unix://${join(dir, 'no-broker.sock')}`, '--namespace', 'shop', '--name', 'cart-0'],
        {},
      );
      try {
        await until(() => server.openConnections >= 1, 'fetch connected to the hung CA', { timeoutMs: 20_000 });
        fetch.child.kill('SIGTERM');
        const exit = await fetch.exit(EXIT_BOUND_MS);
        assert.ok(exit, `still running ${EXIT_BOUND_MS} ms after SIGTERM:\n${fetch.tail()}`);
        assert.deepEqual(exit, { code: 1, signal: null }, fetch.tail());
        assert.match(fetch.tail(), /certbroker: received SIGTERM/);
        await until(() => server.openConnections === 0, 'the hung CA saw the connection closed', { timeoutMs: 5000 });
      } finally {
        fetch.kill();
      }
    });
  }

  const caProcess = async (namespace: string): Promise<CliProcess> => {
    const kubeconfig = join(dir, 'ca-admin.kubeconfig');
    await stack.dc.writeKubeconfig(kubeconfig);
    return new CliProcess(['ca', '--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', 'off'], {
      CA_NAMESPACE: namespace,
      CA_SERVING_DNS_NAMES: 'localhost',
      CA_SIGNING_WORKERS: '1',
      CA_SHUTDOWN_GRACE_SECONDS: '2',
      LOG_LEVEL: 'info',
    });
  };

  const assertCaStoppedBeforeStart = async (ca: CliProcess) => {
    ca.child.kill('SIGTERM');
    const exit = await ca.exit(EXIT_BOUND_MS);
    assert.ok(exit, `still running ${EXIT_BOUND_MS} ms after one SIGTERM:\n${ca.tail()}`);
    assert.deepEqual(exit, { code: 0, signal: null }, ca.tail());
    assert.ok(ca.hasLog('CA stopped before it finished starting'), ca.tail());
    assert.ok(!ca.hasLog('shutdown did not finish within its grace period; exiting now'), 'ended by itself, not by the hard exit');
  };

  it('ca: exits 0 on the first SIGTERM while its self-signed root Secret is unusable', { timeout: 90_000 }, async () => {
    // A root Secret the CA refuses (and keeps re-reading with backoff, never overwriting it).
    await stack.dc.apply([
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'ca-broken' } },
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'istio-ca-secret', namespace: 'ca-broken' },
        type: 'istio.io/ca-root',
        data: { 'ca-cert.pem': Buffer.from('not a certificate').toString('base64'), 'ca-key.pem': Buffer.from('not a key').toString('base64') },
      },
    ]);
    const ca = await caProcess('ca-broken');
    try {
      await ca.waitForLog('stored self-signed root refused; not ready, retrying');
      await assertCaStoppedBeforeStart(ca);
    } finally {
      ca.kill();
    }
  });

  it('ca: exits 0 on the first SIGTERM while the API server holds its root Secret read', { timeout: 90_000 }, async () => {
    const baseline = stack.dc.openConnections;
    stack.dc.faults.setLatency(HANG_MS);
    const ca = await caProcess('istio-system');
    try {
      // The Secret read and the pod list wait on the API server.
      await until(() => stack.dc.openConnections >= baseline + 1, 'the CA waiting on the API server', { timeoutMs: 20_000 });
      await assertCaStoppedBeforeStart(ca);
    } finally {
      stack.dc.faults.clear();
      ca.kill();
    }
  });

  it('install-cni (with repair): exits 0 on SIGTERM with a hung API server, keeping the plugin', { timeout: 90_000 }, async () => {
    const tree = makeHostTree();
    const kubeconfigPath = join(tree.root, 'install-cni-kubeconfig');
    writeFileSync(kubeconfigPath, stack.dc.kubeconfigYaml({ token: stack.dc.adminToken }), { mode: 0o600 });
    writeFileSync(join(tree.netDir, '10-calico.conflist'), readFileSync(CONFORMANCE + 'list.conflist'));
    const daemon = new DaemonProcess(
      treeEnv(tree, { KUBECONFIG: kubeconfigPath, UNINSTALL_ON_EXIT: 'unless-upgrade', DAEMONSET_NAME: 'istio-cni-node', REPAIR_ENABLED: 'true', LOG_LEVEL: 'info' }),
    );
    try {
      await waitFor(async () => (await daemon.get('/readyz')).status === 200, 'install-cni ready', daemon);
      stack.dc.faults.setLatency(HANG_MS);
      daemon.child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const exit = await Promise.race([daemon.exited, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), EXIT_BOUND_MS)))]);
      clearTimeout(timer);
      assert.ok(exit, `still running ${EXIT_BOUND_MS} ms after SIGTERM:\n${daemon.describe()}`);
      assert.deepEqual(exit, { code: 0, signal: null }, daemon.describe());
      const decision = daemon.logs.find((l) => l.msg === 'leaving the plugin installed');
      assert.match(String(decision?.reason), /cannot read DaemonSet istio-system\/istio-cni-node \(ERR_DEADLINE_EXCEEDED/, daemon.describe());
    } finally {
      stack.dc.faults.clear();
      await daemon.stop('SIGKILL');
      tree.cleanup();
    }
  });
});

