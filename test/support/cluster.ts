/**
 * Devcluster fixtures for tests (one cluster per test file is the intended use).
 *
 *   const cluster = await startCluster();              // HTTPS, kubelet simulation on, silent logs
 *   after(() => cluster.close());
 *   const api = adminClient(cluster);                  // { kc, core, rbac, authn, authz, apps, certs }
 *   await createNamespace(cluster, 'istio-system');
 *   await createServiceAccount(cluster, { namespace: 'istio-system', name: 'ztunnel' });
 *   const pod = await createPod(cluster, { namespace: 'istio-system', name: 'ztunnel-a',
 *     serviceAccountName: 'ztunnel', nodeName: 'node-a' });   // also creates ns/SA/Node if missing
 *   await waitForPodRunning(cluster, { namespace: 'istio-system', name: 'ztunnel-a' });
 *   const token = await serviceAccountToken(cluster, { namespace: 'istio-system',
 *     serviceAccountName: 'ztunnel', audiences: ['istio-ca'], podName: 'ztunnel-a' });
 *   const kc = kubeConfigFor(cluster, apiToken);        // a KubeConfig acting as that token
 *   await cluster.apply(parseManifest(readFileSync('deploy/rbac.yaml', 'utf8')));
 *   const out = await kubectl(cluster, ['get', 'pods', '-A']);   // real kubectl, admin by default
 *
 * Notes for callers:
 * - A token only authenticates to the API server when its audiences include the API audience
 *   (`cluster.issuer`); `serviceAccountToken` defaults to that. Tokens for `istio-ca` are for
 *   the CA's TokenReview, exactly as in a real cluster.
 * - Pod-bound tokens carry node name/uid only when the Node object exists; `createPod` creates
 *   the Node for `nodeName` when it is missing, so tokens carry it.
 * - RBAC is enforced for service-account callers; the admin token is in system:masters.
 * - `cluster.faults` injects latency, 429/500 errors, dropped watches and compaction (410).
 * - Options worth knowing: `startCluster({ clock })` (token times on a FakeClock),
 *   `{ simulateKubelet: false }` (pods stay Pending), `{ requireServiceAccounts: true }`
 *   (pods naming a missing SA are rejected, as the ServiceAccount admission plugin does).
 * - client-node 1.x opens a new TLS connection per request (~7 ms here): keep request counts
 *   modest in hot loops.
 */
import { execFile } from 'node:child_process';
import type { IncomingHttpHeaders } from 'node:http';
import { request, type Agent } from 'node:https';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { startDevCluster, type DevCluster, type DevClusterOptions } from '../../src/devcluster/index.js';
import { removeTempDir, tempDirSync } from './scratch.js';

export type { DevCluster } from '../../src/devcluster/index.js';

export async function startCluster(options: DevClusterOptions = {}): Promise<DevCluster> {
  return startDevCluster({ simulateKubelet: true, ...options });
}

/** A KubeConfig that talks to `cluster` with `token` (optionally defaulting to `namespace`). */
export function kubeConfigFor(cluster: DevCluster, token: string, namespace?: string): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromString(cluster.kubeconfigYaml({ token, ...(namespace ? { namespace } : {}) }));
  return kc;
}

export interface Clients {
  readonly kc: k8s.KubeConfig;
  readonly core: k8s.CoreV1Api;
  readonly rbac: k8s.RbacAuthorizationV1Api;
  readonly authn: k8s.AuthenticationV1Api;
  readonly authz: k8s.AuthorizationV1Api;
  readonly apps: k8s.AppsV1Api;
  readonly certs: k8s.CertificatesV1Api;
}

export function clientsFor(kc: k8s.KubeConfig): Clients {
  return {
    kc,
    core: kc.makeApiClient(k8s.CoreV1Api),
    rbac: kc.makeApiClient(k8s.RbacAuthorizationV1Api),
    authn: kc.makeApiClient(k8s.AuthenticationV1Api),
    authz: kc.makeApiClient(k8s.AuthorizationV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    certs: kc.makeApiClient(k8s.CertificatesV1Api),
  };
}

export function adminClient(cluster: DevCluster): Clients {
  return clientsFor(kubeConfigFor(cluster, cluster.adminToken));
}

function isStatus(err: unknown, code: number): boolean {
  return (err as { code?: number }).code === code;
}

async function createIfMissing(create: () => Promise<unknown>): Promise<void> {
  try {
    await create();
  } catch (err) {
    if (!isStatus(err, 409)) throw err;
  }
}

export async function createNamespace(cluster: DevCluster, name: string, labels?: Record<string, string>): Promise<k8s.V1Namespace> {
  return adminClient(cluster).core.createNamespace({ body: { metadata: { name, ...(labels ? { labels } : {}) } } });
}

/** Creates the namespace if needed, then the service account (409 if it exists). */
export async function createServiceAccount(cluster: DevCluster, o: { namespace: string; name: string }): Promise<k8s.V1ServiceAccount> {
  const { core } = adminClient(cluster);
  await createIfMissing(() => core.createNamespace({ body: { metadata: { name: o.namespace } } }));
  return core.createNamespacedServiceAccount({ namespace: o.namespace, body: { metadata: { name: o.name } } });
}

export async function createNode(cluster: DevCluster, o: { name: string; internalIP?: string; labels?: Record<string, string> }): Promise<k8s.V1Node> {
  const { core } = adminClient(cluster);
  return core.createNode({
    body: {
      metadata: { name: o.name, labels: { 'kubernetes.io/hostname': o.name, ...(o.labels ?? {}) } },
      ...(o.internalIP ? { status: { addresses: [{ type: 'InternalIP', address: o.internalIP }] } } : {}),
    },
  });
}

export interface PodSpecOptions {
  readonly namespace: string;
  readonly name: string;
  readonly serviceAccountName?: string;
  readonly nodeName?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly hostNetwork?: boolean;
  readonly image?: string;
}

/** Creates a pod, first creating its namespace, service account and Node when missing. */
export async function createPod(cluster: DevCluster, o: PodSpecOptions): Promise<k8s.V1Pod> {
  const { core } = adminClient(cluster);
  const sa = o.serviceAccountName ?? 'default';
  await createIfMissing(() => core.createNamespace({ body: { metadata: { name: o.namespace } } }));
  if (sa !== 'default') await createIfMissing(() => core.createNamespacedServiceAccount({ namespace: o.namespace, body: { metadata: { name: sa } } }));
  if (o.nodeName) {
    const nodeName = o.nodeName;
    await createIfMissing(() => core.createNode({ body: { metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } } } }));
  }
  return core.createNamespacedPod({
    namespace: o.namespace,
    body: {
      metadata: { name: o.name, ...(o.labels ? { labels: o.labels } : {}), ...(o.annotations ? { annotations: o.annotations } : {}) },
      spec: {
        serviceAccountName: sa,
        ...(o.nodeName ? { nodeName: o.nodeName } : {}),
        ...(o.hostNetwork ? { hostNetwork: true } : {}),
        containers: [{ name: 'main', image: o.image ?? 'registry.k8s.io/pause:3.10' }],
      },
    },
  });
}

export async function deletePod(cluster: DevCluster, o: { namespace: string; name: string; gracePeriodSeconds?: number }): Promise<void> {
  await adminClient(cluster).core.deleteNamespacedPod({ namespace: o.namespace, name: o.name, ...(o.gracePeriodSeconds !== undefined ? { gracePeriodSeconds: o.gracePeriodSeconds } : {}) });
}

/** Resolves with the pod once it is Running (needs the kubelet simulation, on in startCluster). */
export async function waitForPodRunning(cluster: DevCluster, o: { namespace: string; name: string; attempts?: number }): Promise<k8s.V1Pod> {
  const { core } = adminClient(cluster);
  for (let i = 0; i < (o.attempts ?? 1000); i++) {
    const pod = await core.readNamespacedPod({ namespace: o.namespace, name: o.name });
    if (pod.status?.phase === 'Running') return pod;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`pod ${o.namespace}/${o.name} did not become Running`);
}

/**
 * A token from the real TokenRequest endpoint (as admin). Bound to `podName` when given;
 * audiences default to the API server's own (`cluster.issuer`).
 */
export async function serviceAccountToken(
  cluster: DevCluster,
  o: { namespace: string; serviceAccountName: string; audiences?: string[]; podName?: string; expirationSeconds?: number },
): Promise<string> {
  const { core } = adminClient(cluster);
  const res = await core.createNamespacedServiceAccountToken({
    namespace: o.namespace,
    name: o.serviceAccountName,
    body: {
      spec: {
        audiences: o.audiences ?? [cluster.issuer],
        ...(o.expirationSeconds !== undefined ? { expirationSeconds: o.expirationSeconds } : {}),
        ...(o.podName ? { boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: o.podName } } : {}),
      },
    },
  });
  const token = res.status?.token;
  if (!token) throw new Error('TokenRequest returned no token');
  return token;
}

export interface KubectlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs the real kubectl against the cluster (admin unless `token` is given) with a private
 * kubeconfig and a request timeout. Never rejects on a non-zero exit: check `code`.
 */
export async function kubectl(cluster: DevCluster, args: readonly string[], o: { token?: string; stdin?: string; timeoutMs?: number } = {}): Promise<KubectlResult> {
  const dir = tempDirSync('kubectl-');
  try {
    const path = join(dir, 'kubeconfig');
    await writeFile(path, cluster.kubeconfigYaml({ token: o.token ?? cluster.adminToken }), { mode: 0o600 });
    return await new Promise<KubectlResult>((resolve) => {
      const child = execFile(
        'kubectl',
        ['--kubeconfig', path, '--request-timeout', '10s', ...args],
        { timeout: o.timeoutMs ?? 20000, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir } },
        (err, stdout, stderr) => {
          const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
          resolve({ code, stdout, stderr });
        },
      );
      if (o.stdin !== undefined) child.stdin?.end(o.stdin);
    });
  } finally {
    await removeTempDir(dir);
  }
}

export interface RawReply {
  readonly code: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
}

/**
 * One raw HTTPS request to the devcluster (for bodies and headers a client library would not
 * send). Bearer token: the admin's unless `token` is given, none when it is null. Resolves with
 * whatever the server answers; rejects only on a transport error.
 */
export function rawRequest(
  cluster: DevCluster,
  method: string,
  path: string,
  o: { token?: string | null; body?: string | Buffer; contentType?: string; agent?: Agent; headers?: Readonly<Record<string, string>> } = {},
): Promise<RawReply> {
  const token = o.token === undefined ? cluster.adminToken : o.token;
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, cluster.url),
      {
        method,
        ...(o.agent ? { agent: o.agent } : { ca: cluster.caCertPem }),
        headers: {
          ...(token !== null ? { authorization: `Bearer ${token}` } : {}),
          ...(o.contentType ? { 'content-type': o.contentType } : {}),
          ...(o.body !== undefined ? { 'content-length': Buffer.byteLength(o.body) } : {}),
          ...(o.headers ?? {}),
        },
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ code: res.statusCode ?? 0, headers: res.headers, text }));
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}
