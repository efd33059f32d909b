/**
 * What the CNI end-to-end tests share: a devcluster with the istio-cni service account bound by
 * the shipped RBAC (deploy/rbac-istio-cni.yaml, enforced by the devcluster), the plugin kubeconfig written as install-cni
 * writes it (its own renderer, a TokenRequest token), the plugin's conflist entry from
 * install-cni's builder chained after Debian's bridge + host-local, and throwaway network
 * namespaces and a private bridge that are removed even when a test fails.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { request } from 'node:https';
import { accessSync, constants, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseManifest, startDevCluster, type DevCluster } from '../../../src/devcluster/index.js';
import { renderKubeconfig } from '../../../src/cni/install/kubeconfig.js';
import { buildPluginEntry } from '../../../src/cni/install/plugin-entry.js';
import { Secret } from '../../../src/core/secret.js';
import { CniRuntime, type Attachment, type Conflist } from '../../support/cni-runner.js';
import { seaBinaries } from '../../support/sea-binary.js';
import { netnsProbe } from '../iptables/netns.js';
import { tempDirSync } from '../../support/scratch.js';

export const DEBIAN_CNI_DIR = '/usr/lib/cni';
export const CNI_NAMESPACE = 'istio-system';

/** The RBAC the istio-cni service account ships with (dist/test/cni/e2e -> repo root). */
const ISTIO_CNI_RBAC = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../../../deploy/rbac-istio-cni.yaml');

/** Why these tests cannot run here, or undefined. */
export function e2eUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, bridge, iptables)';
  for (const p of ['bridge', 'host-local']) {
    if (!isExecutable(join(DEBIAN_CNI_DIR, p))) return `${DEBIAN_CNI_DIR}/${p} is not installed (Debian package containernetworking-plugins)`;
  }
  return netnsProbe(`cbcni-probe-${process.pid}`);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** A request to the devcluster as its admin (JSON in, JSON out). */
export function adminRequest(cluster: DevCluster, method: string, path: string, body?: unknown): Promise<unknown> {
  const url = new URL(path, cluster.url);
  const data = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        ca: cluster.caCertPem,
        headers: {
          authorization: `Bearer ${cluster.adminToken}`,
          accept: 'application/json',
          ...(data ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          if ((res.statusCode ?? 0) >= 300) reject(new Error(`${method} ${path}: HTTP ${res.statusCode}: ${text}`));
          else resolve(text === '' ? undefined : JSON.parse(text));
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

export interface PluginCluster {
  readonly cluster: DevCluster;
  /** The directory install-cni shares with the plugin (kubeconfig, broker socket). */
  readonly runDir: string;
  readonly kubeconfigPath: string;
  close(): Promise<void>;
}

/** A devcluster with istio-cni's identity, and the plugin kubeconfig in `<dir>/run`. */
export async function startPluginCluster(dir: string): Promise<PluginCluster> {
  const cluster = await startDevCluster();
  try {
    await cluster.apply([
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: CNI_NAMESPACE } },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'istio-cni', namespace: CNI_NAMESPACE } },
      ...(parseManifest(readFileSync(ISTIO_CNI_RBAC, 'utf8')) as object[]),
    ]);
    const tr = (await adminRequest(cluster, 'POST', `/api/v1/namespaces/${CNI_NAMESPACE}/serviceaccounts/istio-cni/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    })) as { status: { token: string } };
    const url = new URL(cluster.url);
    const runDir = join(dir, 'run');
    mkdirSync(runDir, { recursive: true });
    const kubeconfigPath = join(runDir, 'istio-cni-kubeconfig');
    writeFileSync(
      kubeconfigPath,
      renderKubeconfig({
        serviceHost: url.hostname,
        servicePort: url.port,
        serviceProtocol: 'https',
        caPem: cluster.caCertPem,
        skipTlsVerify: false,
        token: new Secret(tr.status.token),
      }),
      { mode: 0o600 },
    );
    return { cluster, runDir, kubeconfigPath, close: () => cluster.close() };
  } catch (err) {
    await cluster.close();
    throw err;
  }
}

export function namespaceObject(name: string, labels: Record<string, string> = {}): object {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } };
}

export interface PodSpecOptions {
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly containers?: readonly object[];
  readonly nodeName?: string;
  readonly serviceAccountName?: string;
}

export function podObject(namespace: string, name: string, o: PodSpecOptions = {}): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, labels: o.labels ?? {}, annotations: o.annotations ?? {} },
    spec: {
      ...(o.nodeName ? { nodeName: o.nodeName } : {}),
      ...(o.serviceAccountName ? { serviceAccountName: o.serviceAccountName } : {}),
      containers: o.containers ?? [{ name: 'app', image: 'registry.local/app:1' }],
    },
  };
}

/** A sidecar-injected pod as Istio's injector leaves it (status annotation, istio-proxy). */
export function sidecarPod(namespace: string, name: string, annotations: Record<string, string> = {}, nodeName?: string): object {
  return podObject(namespace, name, {
    ...(nodeName ? { nodeName } : {}),
    annotations: { 'sidecar.istio.io/status': '{"containers":["istio-proxy"]}', ...annotations },
    containers: [
      { name: 'app', image: 'registry.local/app:1', ports: [{ containerPort: 8080 }] },
      { name: 'istio-proxy', image: 'registry.local/proxyv2:1', args: ['proxy', 'sidecar'], securityContext: { runAsUser: 1337, runAsGroup: 1337 } },
    ],
  });
}

/** CNI_PATH for the tests: Debian's plugins and our istio-cni binary side by side. */
export function cniBinDir(dir: string, istioCni: string): string {
  const bin = join(dir, 'cni-bin');
  mkdirSync(bin, { recursive: true });
  for (const p of ['bridge', 'host-local', 'loopback']) symlinkSync(join(DEBIAN_CNI_DIR, p), join(bin, p));
  symlinkSync(istioCni, join(bin, 'istio-cni'));
  return bin;
}

export interface NetworkNames {
  readonly bridge: string;
  /** Third octet of 10.244.<n>.0/24: per test file (tag) a disjoint range, per process a slot in it. */
  readonly subnet: string;
  readonly gateway: string;
}

const SUBNET_BASE: Readonly<Record<string, number>> = { s: 100, a: 150, b: 200 };

export function networkNames(tag: 's' | 'a' | 'b'): NetworkNames {
  const n = SUBNET_BASE[tag]! + (process.pid % 50);
  return { bridge: `cb${tag}${process.pid % 100000}`.slice(0, 15), subnet: `10.244.${n}.0/24`, gateway: `10.244.${n}.1` };
}

/** An IPv6-only network: fd00:cb:<n>::/64 (unique local addresses, never routed outside). */
export function networkNames6(tag: 's' | 'a' | 'b'): NetworkNames {
  const n = (SUBNET_BASE[tag]! + (process.pid % 50)).toString(16);
  return { bridge: `cb6${tag}${process.pid % 100000}`.slice(0, 15), subnet: `fd00:cb:${n}::/64`, gateway: `fd00:cb:${n}::1` };
}

/** bridge + host-local (private IPAM dir), then istio-cni as install-cni would chain it. */
export function conflist(net: NetworkNames, options: { ipamDir: string; runDir: string; ambient: boolean; extra?: Record<string, unknown> }): Conflist {
  const entry = buildPluginEntry({
    cniAgentRunDir: options.runDir,
    logLevel: 'debug',
    podNamespace: CNI_NAMESPACE,
    ambientEnabled: options.ambient,
    excludeNamespaces: ['kube-system'],
    nativeNftables: false,
    enableAmbientDetectionRetry: false,
  });
  const { cniVersion: _v, ...pluginEntry } = entry;
  void _v;
  return {
    cniVersion: '1.0.0',
    name: 'cbnet',
    plugins: [
      {
        type: 'bridge',
        bridge: net.bridge,
        isGateway: true,
        ipMasq: false,
        ipam: {
          type: 'host-local',
          subnet: net.subnet,
          dataDir: options.ipamDir,
          routes: [{ dst: net.subnet.includes(':') ? '::/0' : '0.0.0.0/0' }],
        },
      },
      { ...(pluginEntry as Record<string, unknown>), type: 'istio-cni', pod_retrieval_max_retries: 5, pod_retrieval_interval_ms: 200, ...options.extra },
    ],
  };
}

export class Netns {
  readonly name: string;
  readonly path: string;
  constructor(name: string) {
    this.name = name;
    this.path = `/var/run/netns/${name}`;
    spawnSync('ip', ['netns', 'del', name]);
    execFileSync('ip', ['netns', 'add', name]);
    execFileSync('ip', ['netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up']);
  }
  exec(cmd: string, args: readonly string[]): string {
    return execFileSync('ip', ['netns', 'exec', this.name, cmd, ...args], { encoding: 'utf8' });
  }
  remove(): void {
    spawnSync('ip', ['netns', 'del', this.name]);
  }
}

export function removeBridge(name: string): void {
  spawnSync('ip', ['link', 'del', name]);
}

/**
 * The bridge plugin with isGateway turns on IPv4 forwarding on the host; the tests put the
 * previous value back when they are done.
 */
export function preserveIpForward(): () => void {
  const path = '/proc/sys/net/ipv4/ip_forward';
  const before = readFileSync(path, 'utf8').trim();
  return () => {
    try {
      writeFileSync(path, before);
    } catch {
      /* not writable here: nothing was changed either */
    }
  };
}

export interface E2eSetup {
  /** Names the temporary directory (cni-e2e-<name>-…). */
  readonly name: string;
  readonly net: NetworkNames;
  readonly ambient: boolean;
  /** Extra fields of the istio-cni entry in the conflist. */
  readonly extra?: Record<string, unknown>;
  /** Namespaces, pods… the devcluster holds before the first test. */
  readonly objects: readonly object[];
  /**
   * What else the file needs before its first test, once the rest is up (the hook of this
   * fixture; a second top-level before() of the file could run before this one is done).
   */
  readonly prepare?: (e2e: CniE2e) => Promise<void> | void;
}

export interface PodAttachment {
  readonly namespace: string;
  readonly pod: string;
  /** More K=V pairs of CNI_ARGS after the pod's namespace and name. */
  readonly args?: string;
}

interface StartedE2e {
  readonly dir: string;
  readonly plugin: PluginCluster;
  readonly runtime: CniRuntime;
  readonly list: Conflist;
}

/**
 * One CNI end-to-end test file's world, set up in a `before` hook and taken down in an `after`
 * hook that runs even when a test fails: the host's ip_forward kept, a temporary directory, the
 * plugin cluster with `setup.objects`, the packaged istio-cni beside Debian's plugins, the
 * conflist, and every network namespace and attachment the tests ask for (DEL, then the namespace
 * removed, then the bridge). Whatever else a test starts it hands to `defer`; cleanups run last
 * registered first.
 */
export class CniE2e {
  /** Why the tests are skipped here, or undefined. */
  readonly skip: string | undefined = e2eUnavailable();
  readonly net: NetworkNames;
  readonly #setup: E2eSetup;
  readonly #cleanups: Array<() => unknown> = [];
  #state: StartedE2e | undefined;

  constructor(setup: E2eSetup) {
    this.#setup = setup;
    this.net = setup.net;
  }

  get dir(): string {
    return this.#started().dir;
  }
  get plugin(): PluginCluster {
    return this.#started().plugin;
  }
  get runtime(): CniRuntime {
    return this.#started().runtime;
  }
  get list(): Conflist {
    return this.#started().list;
  }

  #started(): StartedE2e {
    if (!this.#state) throw new Error('the CNI end-to-end fixture is used before its before() hook ran');
    return this.#state;
  }

  /** Runs `fn` in the after hook (before the fixture's own teardown). */
  defer(fn: () => unknown): void {
    this.#cleanups.push(fn);
  }

  /** A fresh network namespace cbcni-<tag>-<pid>, removed after the tests. */
  netns(tag: string): Netns {
    const ns = new Netns(`cbcni-${tag}-${process.pid}`);
    this.defer(() => ns.remove());
    return ns;
  }

  /** eth0 of `ns` for a pod; DEL runs for it after the tests whatever they left behind. */
  attachment(ns: Netns, p: PodAttachment): Attachment {
    const a: Attachment = {
      containerId: `${p.pod}-${process.pid}`,
      netns: ns.path,
      ifname: 'eth0',
      args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${p.namespace};K8S_POD_NAME=${p.pod}${p.args ? `;${p.args}` : ''}`,
    };
    this.defer(() => this.runtime.del(this.list, a).catch(() => undefined));
    return a;
  }

  async start(): Promise<void> {
    const { name, net, ambient, extra, objects } = this.#setup;
    this.defer(preserveIpForward());
    const dir = tempDirSync(`cni-e2e-${name}-`);
    this.defer(() => rmSync(dir, { recursive: true, force: true }));
    const bins = await seaBinaries();
    if (bins.buildMs > 0) process.stdout.write(`# built the single executables in ${bins.buildMs} ms\n`);
    const plugin = await startPluginCluster(dir);
    this.defer(() => plugin.close());
    this.defer(() => removeBridge(net.bridge));
    await plugin.cluster.apply([...objects]);
    const runtime = new CniRuntime({ cniPath: [cniBinDir(dir, bins.istioCni)] });
    const list = conflist(net, { ipamDir: join(dir, 'ipam'), runDir: plugin.runDir, ambient, ...(extra ? { extra } : {}) });
    this.#state = { dir, plugin, runtime, list };
    await this.#setup.prepare?.(this);
  }

  /** Every cleanup runs; the first failure is reported once all have. */
  async stop(): Promise<void> {
    let first: unknown;
    for (const fn of this.#cleanups.splice(0).reverse()) {
      try {
        await fn();
      } catch (err) {
        first ??= err;
      }
    }
    if (first !== undefined) throw first;
  }
}

/** The fixture of one test file, with its before/after hooks registered (nothing runs when skipped). */
export function cniE2e(setup: E2eSetup): CniE2e {
  const e2e = new CniE2e(setup);
  before(async () => {
    if (!e2e.skip) await e2e.start();
  });
  after(() => e2e.stop());
  return e2e;
}
