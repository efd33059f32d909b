/**
 * `certbroker devcluster`: runs the devcluster as a process, writes the admin kubeconfig, prints
 * how to use it, optionally seeds sample objects and the manifests given with --apply, and
 * drains on SIGTERM/SIGINT. The admin token goes only into the kubeconfig file (mode 0600).
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ConfigReader } from '../core/config.js';
import { createLogger, parseLogLevel, type Logger } from '../core/log.js';
import { aborted, HARD_EXIT_MARGIN_MS, signalController } from '../ops/lifecycle.js';
import { startDevCluster, DEFAULT_ISSUER, type DevCluster } from './devcluster.js';
import { parseManifest } from './rest.js';

export const ENV_DEVCLUSTER_HOST = 'DEVCLUSTER_HOST';
export const ENV_DEVCLUSTER_PORT = 'DEVCLUSTER_PORT';
export const ENV_DEVCLUSTER_KUBECONFIG = 'DEVCLUSTER_KUBECONFIG';
export const ENV_DEVCLUSTER_SIMULATE_KUBELET = 'DEVCLUSTER_SIMULATE_KUBELET';
export const ENV_DEVCLUSTER_ISSUER = 'DEVCLUSTER_ISSUER';
/** Interval of BOOKMARK events on watches that ask for them (a real API server: about a minute). */
export const ENV_DEVCLUSTER_BOOKMARK_INTERVAL_MS = 'DEVCLUSTER_BOOKMARK_INTERVAL_MS';
/** Where the simulated kubelet lays out pod volumes (podCertificate projections); unset: none written. */
export const ENV_DEVCLUSTER_PODS_DIR = 'DEVCLUSTER_PODS_DIR';
export const ENV_LOG_LEVEL = 'LOG_LEVEL';

export interface DevClusterFlags {
  readonly host?: string;
  readonly port?: string;
  readonly kubeconfig?: string;
  readonly simulateKubelet?: string;
  readonly issuer?: string;
  readonly samples?: boolean;
  readonly apply?: readonly string[];
  readonly logLevel?: string;
  readonly podsDir?: string;
}

export interface DevClusterRunConfig {
  readonly host: string;
  readonly port: number;
  readonly kubeconfigPath: string;
  readonly simulateKubelet: boolean;
  readonly issuer: string;
  readonly bookmarkIntervalMs: number;
  readonly samples: boolean;
  readonly applyFiles: readonly string[];
  readonly podsDir: string | undefined;
}

export function devClusterConfig(flags: DevClusterFlags, env: Readonly<Record<string, string | undefined>> = process.env): DevClusterRunConfig {
  const r = new ConfigReader(env);
  const config: DevClusterRunConfig = {
    host: r.string(ENV_DEVCLUSTER_HOST, '127.0.0.1', flags.host),
    port: r.int(ENV_DEVCLUSTER_PORT, 6443, { min: 0, max: 65535, ...(flags.port !== undefined ? { explicit: flags.port } : {}) }),
    kubeconfigPath: resolve(r.string(ENV_DEVCLUSTER_KUBECONFIG, '.devcluster/kubeconfig', flags.kubeconfig)),
    simulateKubelet: r.bool(ENV_DEVCLUSTER_SIMULATE_KUBELET, true, flags.simulateKubelet),
    issuer: r.string(ENV_DEVCLUSTER_ISSUER, DEFAULT_ISSUER, flags.issuer),
    bookmarkIntervalMs: r.int(ENV_DEVCLUSTER_BOOKMARK_INTERVAL_MS, 1000, { min: 10, max: 3_600_000 }),
    samples: flags.samples ?? false,
    applyFiles: flags.apply ?? [],
    podsDir: ((dir) => (dir === undefined ? undefined : resolve(dir)))(r.optionalString(ENV_DEVCLUSTER_PODS_DIR, flags.podsDir)),
  };
  r.done();
  return Object.freeze(config);
}

/** A small demo world: a mesh namespace, a node, a ztunnel-like pod and a workload. */
export function sampleObjects(): object[] {
  const pod = (ns: string, name: string, sa: string, labels: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns, labels },
    spec: { serviceAccountName: sa, nodeName: 'node-1', containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
  });
  return [
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-1', labels: { 'kubernetes.io/hostname': 'node-1' } }, status: { addresses: [{ type: 'InternalIP', address: '172.18.0.2' }] } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'istio-system' } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo', labels: { 'istio.io/dataplane-mode': 'ambient' } } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'ztunnel', namespace: 'istio-system' } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'httpbin', namespace: 'demo' } },
    pod('istio-system', 'ztunnel-node-1', 'ztunnel', { app: 'ztunnel' }),
    pod('demo', 'httpbin-1', 'httpbin', { app: 'httpbin' }),
  ];
}

export function usage(cluster: DevCluster, kubeconfigPath: string): string {
  return [
    `devcluster API server: ${cluster.url}`,
    `admin kubeconfig:      ${kubeconfigPath}`,
    '',
    'Use it with kubectl:',
    `  export KUBECONFIG=${kubeconfigPath}`,
    '  kubectl get namespaces',
    '  kubectl -n istio-system create token ztunnel --audience istio-ca',
    '',
    'Stop with Ctrl-C.',
    '',
  ].join('\n');
}

export async function runDevCluster(flags: DevClusterFlags, o: { logger?: Logger; out?: (text: string) => void } = {}): Promise<void> {
  const logger = o.logger ?? createLogger({ level: parseLogLevel(flags.logLevel ?? process.env[ENV_LOG_LEVEL]), fields: { component: 'devcluster' } });
  const config = devClusterConfig(flags);
  const stop = signalController(logger, { hardExitAfterMs: HARD_EXIT_MARGIN_MS });
  const cluster = await startDevCluster({ host: config.host, port: config.port, logger, simulateKubelet: config.simulateKubelet, issuer: config.issuer, bookmarkIntervalMs: config.bookmarkIntervalMs, ...(config.podsDir ? { podsDir: config.podsDir } : {}) });
  try {
    if (config.samples) await cluster.apply(sampleObjects());
    for (const file of config.applyFiles) await cluster.apply(parseManifest(await readFile(file, 'utf8')) as object[]);
    await cluster.writeKubeconfig(config.kubeconfigPath);
    (o.out ?? ((t: string) => process.stdout.write(t)))(usage(cluster, config.kubeconfigPath));
    await aborted(stop.signal);
  } finally {
    await cluster.close();
  }
}
