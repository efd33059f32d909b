/**
 * Trust-bundle publication end to end: the CA runs as its own service account with the RBAC of
 * deploy/rbac-ca.yaml (the devcluster enforces it, attest included), and publishes its roots as
 * the `istio-ca-root-cert` ConfigMap in every namespace (skipping istiod's list), in namespaces
 * created later, restoring edited and deleted copies, and as the signer-linked ClusterTrustBundle.
 * Then two `certbroker ca` processes: only the Lease holder writes; SIGKILL it and the other takes
 * over and keeps publishing. Every wait is for a condition, never a duration.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CertificatesV1beta1Api, CoordinationV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { createRootCa } from '../../src/pki/index.js';
import type { CaServer } from '../../src/ca/index.js';
import { CA_NAMESPACE, CA_SA, httpGet, startCaEnv, type CaEnv } from './support/ca-env.js';
import { applyShippedCaRbac } from './support/trust-bundles.js';
import { tempDir } from './support/pki-fixtures.js';
import { watchLog, writeCaLauncher, type ChildLog } from './support/ca-process.js';
import { eventually } from '../broker/support/eventually.js';
import { kubectl } from '../support/cluster.js';
import { kubectlMissing } from '../support/tools.js';

const CM = 'istio-ca-root-cert';
const CTB = 'istio.io:istiod-ca:root-cert';
const SIGNER = 'istio.io/istiod-ca';
const LEASE = 'certbroker-ca-publisher';
let env: CaEnv;
let ca: CaServer;

before(async () => {
  env = await startCaEnv();
  // The CA's RBAC exactly as shipped (it replaces the test's narrower ClusterRole of the same name).
  await applyShippedCaRbac(env);
  for (const ns of ['app', 'kube-public', 'kube-node-lease']) await env.ensureNamespace(ns);
});
after(async () => {
  await env?.close();
});

const ctbApi = () => env.admin.makeApiClient(CertificatesV1beta1Api);
const leaseApi = () => env.admin.makeApiClient(CoordinationV1Api);

async function rootConfigMap(namespace: string): Promise<V1ConfigMap | undefined> {
  try {
    return await env.core.readNamespacedConfigMap({ namespace, name: CM });
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}

/** Waits until `namespace` holds the ConfigMap with exactly `roots`. */
function published(namespace: string, roots: string): Promise<V1ConfigMap> {
  return eventually(`${CM} in ${namespace}`, async () => {
    const cm = await rootConfigMap(namespace);
    return cm?.data?.['root-cert.pem'] === roots ? cm : undefined;
  });
}

const publishConfig = (identity: string) => ({
  skipNamespaces: ['kube-public', 'kube-node-lease', 'local-path-storage'],
  clusterTrustBundleSignerName: SIGNER,
  leaseNamespace: CA_NAMESPACE,
  leaseName: LEASE,
  identity,
  election: { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 500 },
});

test('the leader publishes istio-ca-root-cert in every namespace, in new ones, and restores edited and deleted copies', async () => {
  ca = await env.startCa({ publish: publishConfig('ca-a') });
  await eventually('the CA leads', () => ca.publisher?.isLeader);
  const roots = ca.rootsPem();
  assert.match(roots, /^-----BEGIN CERTIFICATE-----/);
  for (const ns of ['default', 'kube-system', 'istio-system', 'app']) {
    const cm = await published(ns, roots);
    assert.equal(cm.metadata?.labels?.['istio.io/config'], 'true', `istiod's label in ${ns}`);
  }
  await ca.publisher!.idle();
  for (const ns of ['kube-public', 'kube-node-lease']) assert.equal(await rootConfigMap(ns), undefined, `${ns} is skipped, as istiod does`);

  await env.ensureNamespace('added-later');
  await published('added-later', roots);

  const current = (await rootConfigMap('app'))!;
  await env.core.replaceNamespacedConfigMap({
    namespace: 'app',
    name: CM,
    body: { metadata: { name: CM, namespace: 'app', resourceVersion: current.metadata!.resourceVersion! }, data: { 'root-cert.pem': 'tampered', extra: 'kept' } },
  });
  const restored = await published('app', roots);
  assert.equal(restored.data?.extra, 'kept', 'other keys are left alone');
  assert.equal(restored.metadata?.labels?.['istio.io/config'], 'true', 'the label is put back');

  await env.core.deleteNamespacedConfigMap({ namespace: 'default', name: CM });
  await published('default', roots);

  const lease = await leaseApi().readNamespacedLease({ namespace: CA_NAMESPACE, name: LEASE });
  assert.equal(lease.spec?.holderIdentity, 'ca-a');
  const metrics = await ca.metrics.registry.metrics();
  assert.match(metrics, /certbroker_leader\{lease="istio-system\/certbroker-ca-publisher"\} 1/);
  assert.match(metrics, /certbroker_ca_trust_bundle_writes_total\{object="configmap",action="create",result="ok"\} [1-9]/);
  const complaints = env.logs.filter((l) => l.includes('trust-bundle-publisher') && /"level":"(warn|error)"/.test(l));
  assert.deepEqual(complaints, [], 'the shipped RBAC lets every write and watch through');
});

test('the signer-linked ClusterTrustBundle is published, labelled, restored after an edit, and listed by kubectl', async () => {
  const roots = ca.rootsPem();
  const bundle = await eventually('the ClusterTrustBundle', async () => {
    try {
      return await ctbApi().readClusterTrustBundle({ name: CTB });
    } catch {
      return undefined;
    }
  });
  assert.equal(bundle.spec.signerName, SIGNER);
  assert.equal(bundle.spec.trustBundle, roots);
  assert.equal(bundle.metadata?.labels?.['app.kubernetes.io/managed-by'], 'certbroker-ca');
  // Someone replaces the bundle with another (valid) CA: the leader puts the CA's roots back.
  const stranger = await createRootCa({ subject: 'CN=Stranger Root', ttlSeconds: 86_400 });
  await ctbApi().replaceClusterTrustBundle({
    name: CTB,
    body: { apiVersion: 'certificates.k8s.io/v1beta1', kind: 'ClusterTrustBundle', metadata: { name: CTB, resourceVersion: bundle.metadata!.resourceVersion! }, spec: { signerName: SIGNER, trustBundle: stranger.pem } },
  });
  await eventually('the bundle restored', async () => ((await ctbApi().readClusterTrustBundle({ name: CTB })).spec.trustBundle === roots ? true : undefined));
  const skip = kubectlMissing();
  if (skip === undefined) {
    const r = await kubectl(env.cluster, ['get', 'clustertrustbundles']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`${CTB.replaceAll('.', '\\.')}\\s+${SIGNER.replaceAll('.', '\\.')}`));
    const lease = await kubectl(env.cluster, ['-n', CA_NAMESPACE, 'get', 'lease', LEASE]);
    assert.equal(lease.code, 0, lease.stderr);
    assert.match(lease.stdout, /^NAME\s+HOLDER\s+AGE\ncertbroker-ca-publisher\s+ca-a\s/);
  }
});

interface CaProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly log: ChildLog;
  readonly opsPort: number;
  readonly exited: Promise<number | null>;
}

async function metricsOf(p: CaProcess): Promise<string> {
  return (await httpGet(p.opsPort, '/metrics')).body;
}

/** The sum of a counter's samples whose labels contain `match`. */
function counter(text: string, name: string, match = ''): number {
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(`${name}{`) && line.includes(match)) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

test('two CA processes: only the Lease holder writes; SIGKILL it and the other takes over and keeps publishing', async () => {
  const roots = ca.rootsPem(); // the same root: the processes load it from istio-ca-secret
  await ca.stop(); // the in-process CA releases the Lease on its way out
  const dir = await tempDir('ca-publisher-');
  const procs: CaProcess[] = [];
  try {
    const kubeconfig = join(dir.path, 'kubeconfig');
    const caToken = await env.token({ namespace: CA_NAMESPACE, serviceAccount: CA_SA, audiences: [env.cluster.issuer], expirationSeconds: 48 * 3600 });
    await writeFile(kubeconfig, env.cluster.kubeconfigYaml({ token: caToken }), { mode: 0o600 });
    const launcher = await writeCaLauncher(dir.path);
    for (const name of ['proc-a', 'proc-b']) {
      const child = spawn(process.execPath, [launcher, '--kubeconfig', kubeconfig, '--grpc-address', '127.0.0.1:0', '--ops-address', '127.0.0.1:0'], {
        env: {
          ...process.env, POD_NAME: name, CA_NAMESPACE, CA_SERVING_DNS_NAMES: 'localhost', CA_SIGNING_WORKERS: '0', LOG_LEVEL: 'info', CA_SHUTDOWN_GRACE_SECONDS: '1',
          CA_LEADER_LEASE_DURATION_SECONDS: '3', CA_LEADER_RENEW_DEADLINE_SECONDS: '2', CA_LEADER_RETRY_PERIOD_SECONDS: '1',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      const log = watchLog(child);
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const ops = await log.waitFor((r) => r.msg === 'ops endpoint listening');
      await log.waitFor((r) => r.msg === 'CA listening');
      procs.push({ name, child, log, opsPort: Number(ops.port), exited });
    }
    const holder = async () => (await leaseApi().readNamespacedLease({ namespace: CA_NAMESPACE, name: LEASE })).spec?.holderIdentity ?? '';
    const first = await eventually('a process holds the Lease', async () => {
      const h = await holder();
      return procs.find((p) => h.startsWith(`${p.name}_`));
    });
    const second = procs.find((p) => p !== first)!;

    await env.core.deleteNamespacedConfigMap({ namespace: 'app', name: CM });
    await published('app', roots);
    await eventually('the leader counted its write', async () => (counter(await metricsOf(first), 'certbroker_ca_trust_bundle_writes_total', 'result="ok"') > 0 ? true : undefined));
    const follower = await metricsOf(second);
    assert.equal(counter(follower, 'certbroker_ca_trust_bundle_writes_total'), 0, 'the replica without the Lease wrote nothing');
    assert.equal(counter(follower, 'certbroker_leader'), 0);
    assert.equal(counter(await metricsOf(first), 'certbroker_leader'), 1);

    first.child.kill('SIGKILL'); // no release: the Lease must expire
    await first.exited;
    await eventually('the other process took the Lease over', async () => ((await holder()).startsWith(`${second.name}_`) ? true : undefined), 2000);
    await env.core.deleteNamespacedConfigMap({ namespace: 'added-later', name: CM });
    await env.ensureNamespace('after-failover');
    await published('added-later', roots);
    await published('after-failover', roots);
    const taken = await metricsOf(second);
    assert.equal(counter(taken, 'certbroker_leader'), 1);
    assert.ok(counter(taken, 'certbroker_ca_trust_bundle_writes_total', 'result="ok"') >= 2, 'the new leader writes');
    const lease = await leaseApi().readNamespacedLease({ namespace: CA_NAMESPACE, name: LEASE });
    assert.ok((lease.spec?.leaseTransitions ?? 0) >= 2, 'ca-a, then the first process, then the second');

    second.child.kill('SIGTERM');
    assert.equal(await second.exited, 0, second.log.lines.join('\n'));
    assert.equal(await holder(), '', 'released on SIGTERM');
  } catch (err) {
    for (const p of procs) process.stderr.write(`--- ${p.name}\n${p.log.lines.slice(-40).join('\n')}\n`);
    throw err;
  } finally {
    for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    await dir.remove();
  }
});
