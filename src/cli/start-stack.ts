/**
 * `npm start` / `certbroker start`: the whole system on one machine — a devcluster (HTTPS,
 * RBAC), the CA over TLS, a node broker for `node-1` with its own least-privilege RBAC, sample
 * namespaces, service accounts and pods (some on `node-2`), the `node-1` pods registered through
 * the broker's CNI socket with the CNI plugin's client, and a consumer (ztunnel's identity)
 * subscribed to every `node-1` pod over the Broker API. Short certificate lifetimes make
 * rotation visible within minutes. Logs (warnings) go to stderr; stdout shows the live view.
 */
import { X509Certificate } from 'node:crypto';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { createLogger, parseLogLevel, type Logger } from '../core/log.js';
import { Secret } from '../core/secret.js';
import { aborted, signalController } from '../ops/lifecycle.js';
import { startDevCluster } from '../devcluster/index.js';
import { startCaServer } from '../ca/index.js';
import { startBroker, type Broker } from '../broker/broker.js';
import { BrokerClient } from '../broker/client/broker-client.js';
import { IstioCaClient } from '../broker/adapters/ca-client.js';
import { brokerRbacObjects } from '../broker/adapters/rbac.js';
import { workloadCertPem } from '../broker/cache/workload-cert.js';
import { splitDerCertificates } from '../pki/x509-fields.js';
import { pushCniAddEvent } from '../cni/plugin/cni-event-client.js';
import { PRIVATE_DIR_MODE } from '../ops/private-dir.js';
import { CNI_EVENT_SOCKET_NAME } from '../protocol/cni-event.js';
import { CA_TOKEN_AUDIENCE, DEFAULT_CLUSTER_ID } from '../protocol/istio-ca.js';
import type { SubscribeToX509SVIDResponse } from '../protocol/spiffe-broker.js';

export interface StartOptions {
  readonly certTtlSeconds: number;
  /** Stop by itself after this many seconds (0 = run until Ctrl-C). */
  readonly durationSeconds: number;
  /** Refresh period of the live view. */
  readonly intervalMs: number;
  readonly print?: (text: string) => void;
  readonly signal?: AbortSignal;
}

const TD = 'cluster.local';
const SYSTEM_NS = 'istio-system';
const BROKER_SA = 'certbroker-node';
const CONSUMER_SA = 'ztunnel';
const NODE = 'node-1';
/** The whole stack stops in a few seconds; a process still alive this long after the stop began exits anyway. */
const STOP_HARD_EXIT_MS = 15_000;

interface SamplePod {
  readonly namespace: string;
  readonly name: string;
  readonly serviceAccount: string;
  readonly nodeName: string;
}

const SAMPLE_PODS: readonly SamplePod[] = [
  { namespace: 'shop', name: 'cart-0', serviceAccount: 'cart', nodeName: 'node-1' },
  { namespace: 'shop', name: 'cart-1', serviceAccount: 'cart', nodeName: 'node-1' },
  { namespace: 'shop', name: 'web-0', serviceAccount: 'web', nodeName: 'node-1' },
  { namespace: 'shop', name: 'web-1', serviceAccount: 'web', nodeName: 'node-2' },
  { namespace: 'bank', name: 'ledger-0', serviceAccount: 'ledger', nodeName: 'node-1' },
  { namespace: 'bank', name: 'teller-0', serviceAccount: 'teller', nodeName: 'node-2' },
];

interface ConsumerView {
  serial: string;
  notAfter: number;
  messages: number;
  ended: string | undefined;
}

/**
 * `signal`, or a deadline `ms` from now, whichever comes first. Not
 * `AbortSignal.any([signal, AbortSignal.timeout(ms)])`: Node 20 holds the timeout signal inside
 * `any()` only weakly, so after a garbage collection it may never fire (nodejs/node#57736) and
 * `--duration-seconds` never ended the stack. A plain timer owned here does; `dispose()` clears it.
 */
export function abortAfter(signal: AbortSignal, ms: number, reason: string): { readonly signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort(signal.reason);
  const timer = setTimeout(() => controller.abort(new Error(reason)), ms);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return {
    signal: controller.signal,
    dispose() {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

function kubeConfigFor(yaml: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  return kc;
}

async function saToken(core: CoreV1Api, namespace: string, name: string, audience: string, expirationSeconds: number): Promise<string> {
  const res = await core.createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [audience], expirationSeconds } } });
  const token = res.status?.token;
  if (!token) throw new Error(`no token for ${namespace}/${name}`);
  return token;
}

function fmtIn(ms: number | undefined, now: number): string {
  if (ms === undefined) return '-';
  const s = Math.round((ms - now) / 1000);
  if (s < 0) return `${-s}s ago`;
  return s >= 120 ? `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

function pad(s: string, n: number): string {
  return s.length >= n ? s.slice(0, n) : s + ' '.repeat(n - s.length);
}

function render(broker: Broker, consumers: ReadonlyMap<string, ConsumerView>, startedAt: number, info: string[]): string {
  const now = Date.now();
  const lines: string[] = [];
  lines.push(`certbroker local stack — up ${fmtIn(startedAt, now).replace(' ago', '')} — ${new Date(now).toISOString()}`);
  lines.push(...info, '');
  lines.push(`node broker for ${NODE} (own identity ${broker.ownIdentity}), ready=${broker.ready}`);
  lines.push(
    `${pad('IDENTITY', 42)} ${pad('STATE', 7)} ${pad('SERIAL', 10)} ${pad('EXPIRES IN', 10)} ${pad('NEXT FETCH', 10)} PODS`,
  );
  for (const s of broker.snapshot().sort((a, b) => a.identity.localeCompare(b.identity))) {
    lines.push(
      `${pad(s.identity.replace(`spiffe://${TD}`, ''), 42)} ${pad(s.state, 7)} ${pad((s.serial ?? '-').slice(0, 8), 10)} ${pad(fmtIn(s.notAfter, now), 10)} ${pad(fmtIn(s.nextAttemptAt, now), 10)} ${s.pods.map((p) => `${p.namespace}/${p.name}`).join(', ') || '(none: forgetting)'}`,
    );
  }
  lines.push('', `consumer ${`spiffe://${TD}/ns/${SYSTEM_NS}/sa/${CONSUMER_SA}`} subscribed over the Broker API:`);
  lines.push(`${pad('POD', 16)} ${pad('SERIAL', 10)} ${pad('EXPIRES IN', 10)} MESSAGES`);
  for (const [pod, v] of [...consumers].sort()) {
    lines.push(`${pad(pod, 16)} ${pad(v.serial.slice(0, 8) || '-', 10)} ${pad(fmtIn(v.notAfter || undefined, now), 10)} ${v.messages}${v.ended ? `  (ended: ${v.ended})` : ''}`);
  }
  const m = broker.certs;
  lines.push('', `CA calls ${m.caCalls}, in flight ${m.inFlight}, queued ${m.queued}. Pods on node-2 get nothing from this broker. Ctrl-C stops everything.`);
  return lines.join('\n');
}

/** The stack's scratch directory (admin kubeconfig, the broker's sockets): 0700 whatever the umask. */
export async function createStackDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'certbroker-stack-'));
  await chmod(dir, PRIVATE_DIR_MODE);
  return dir;
}

export async function runLocalStack(options: StartOptions): Promise<void> {
  const logger: Logger = createLogger({ level: parseLogLevel(process.env['LOG_LEVEL'], 'warn') });
  const print = options.print ?? ((t: string) => process.stdout.write(t + '\n'));
  // SIGTERM/SIGINT, or the reader of stdout going away (`certbroker start | head -1`): stop
  // quietly and clean up; still alive 15 s later, exit anyway.
  const controller = options.signal ? undefined : signalController(logger, { hardExitAfterMs: STOP_HARD_EXIT_MS });
  const signal = options.signal ?? controller!.signal;
  const dir = await createStackDir();
  const cleanups: Array<() => Promise<unknown>> = [];
  const stopAll = async () => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const dc = await startDevCluster({ simulateKubelet: true, logger });
    cleanups.push(() => dc.close());
    const kubeconfigPath = join(dir, 'kubeconfig');
    await dc.writeKubeconfig(kubeconfigPath);
    const admin = kubeConfigFor(dc.kubeconfigYaml({ token: dc.adminToken }));
    const core = admin.makeApiClient(CoreV1Api);
    const namespaces = [SYSTEM_NS, ...new Set(SAMPLE_PODS.map((p) => p.namespace))];
    const sas = [`${SYSTEM_NS}/${BROKER_SA}`, `${SYSTEM_NS}/${CONSUMER_SA}`, ...new Set(SAMPLE_PODS.map((p) => `${p.namespace}/${p.serviceAccount}`))];
    await dc.apply([
      ...namespaces.map((name) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } })),
      ...sas.map((s) => ({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { namespace: s.split('/')[0], name: s.split('/')[1] } })),
      ...brokerRbacObjects({ namespace: SYSTEM_NS, serviceAccount: BROKER_SA }),
    ]);

    const ca = await startCaServer({
      grpcHost: '127.0.0.1',
      grpcPort: 0,
      plaintext: false,
      trustDomain: TD,
      servingDnsNames: ['localhost', '127.0.0.1'],
      defaultTtlSeconds: options.certTtlSeconds,
      maxTtlSeconds: 90 * 86400,
      trustedNodeAccounts: [`${SYSTEM_NS}/${BROKER_SA}`],
      clusters: [{ id: DEFAULT_CLUSTER_ID, kubeConfig: admin, audiences: [CA_TOKEN_AUDIENCE], tokenReview: true }],
      defaultClusterId: DEFAULT_CLUSTER_ID,
      signer: { kind: 'self-signed', namespace: SYSTEM_NS, secretName: 'istio-ca-secret', keyType: 'ec', rootTtlSeconds: 10 * 365 * 86400 },
      tokenCacheSeconds: 60,
      signingWorkers: 1,
      shutdownGraceMs: 1000,
      logger,
    });
    cleanups.push(() => ca.stop());

    const brokerPod = await core.createNamespacedPod({
      namespace: SYSTEM_NS,
      body: {
        metadata: { name: 'certbroker-node-1', namespace: SYSTEM_NS },
        spec: { nodeName: NODE, serviceAccountName: BROKER_SA, hostNetwork: true, containers: [{ name: 'broker', image: 'certbroker' }] },
      },
    });
    const brokerApiToken = await saToken(core, SYSTEM_NS, BROKER_SA, dc.issuer, 48 * 3600);
    const broker = await startBroker({
      trustDomain: TD,
      nodeName: NODE,
      pod: { namespace: SYSTEM_NS, name: 'certbroker-node-1', uid: brokerPod.metadata!.uid!, serviceAccount: BROKER_SA },
      ca: { address: `127.0.0.1:${ca.port}`, rootsPem: ca.rootsPem(), tlsServerName: 'localhost', clusterId: DEFAULT_CLUSTER_ID, audience: CA_TOKEN_AUDIENCE, certTtlSeconds: options.certTtlSeconds },
      tokenExpirationSeconds: 3600,
      maxConcurrentFetches: 8,
      forgetGraceMs: 30_000,
      brokerSocketPath: join(dir, 'broker', 'broker.sock'),
      cniEventSocketPath: join(dir, 'broker', CNI_EVENT_SOCKET_NAME),
      allowedCallers: [`spiffe://${TD}/ns/${SYSTEM_NS}/sa/${CONSUMER_SA}`],
      updateJitterMs: 500,
      ops: { host: '127.0.0.1', port: 0 },
      shutdownGraceMs: 2000,
      kubeConfig: kubeConfigFor(dc.kubeconfigYaml({ token: brokerApiToken })),
      logger,
    });
    cleanups.push(() => broker.stop());
    const readyWait = abortAfter(signal, 30_000, 'the broker was not ready within 30 s');
    await broker.whenReady(readyWait.signal).finally(() => readyWait.dispose());

    // Sample pods; the node-1 ones are registered through the CNI socket as the plugin would.
    const uids = new Map<string, string>();
    for (const p of SAMPLE_PODS) {
      const pod = await core.createNamespacedPod({
        namespace: p.namespace,
        body: { metadata: { name: p.name, namespace: p.namespace }, spec: { nodeName: p.nodeName, serviceAccountName: p.serviceAccount, containers: [{ name: 'app', image: 'app' }] } },
      });
      uids.set(`${p.namespace}/${p.name}`, pod.metadata!.uid!);
      if (p.nodeName === NODE) {
        await pushCniAddEvent({ Netns: `/var/run/netns/${p.name}`, PodName: p.name, PodNamespace: p.namespace, IPs: null }, { socketPath: broker.cniEventSocketPath, timeoutMs: 5000 });
      }
    }

    // The consumer: ztunnel's own SVID from the CA, then one subscription per node-1 pod.
    const consumerToken = new Secret(await saToken(core, SYSTEM_NS, CONSUMER_SA, CA_TOKEN_AUDIENCE, 3600));
    const caClient = new IstioCaClient({
      address: `127.0.0.1:${ca.port}`, caRootsPem: ca.rootsPem(), tlsServerName: 'localhost',
      tokens: { token: async () => consumerToken }, clusterId: DEFAULT_CLUSTER_ID, certTtlSeconds: 3600, impersonate: false,
    });
    const own = await caClient.fetchCertificate(`spiffe://${TD}/ns/${SYSTEM_NS}/sa/${CONSUMER_SA}`, signal);
    caClient.close();
    const client = new BrokerClient({
      socketPath: broker.brokerSocketPath,
      rootsPem: ca.rootsPem(),
      ...workloadCertPem(own),
      trustDomain: TD,
    });
    cleanups.push(async () => client.close());
    const consumers = new Map<string, ConsumerView>();
    for (const p of SAMPLE_PODS.filter((x) => x.nodeName === NODE)) {
      const key = `${p.namespace}/${p.name}`;
      const view: ConsumerView = { serial: '', notAfter: 0, messages: 0, ended: undefined };
      consumers.set(key, view);
      const stream = client.subscribeX509Svid({ uid: uids.get(key)! });
      stream.on('data', (m: SubscribeToX509SVIDResponse) => {
        const leaf = new X509Certificate(splitDerCertificates(m.svids[0]!.x509_svid)[0]!);
        view.serial = leaf.serialNumber.toLowerCase();
        view.notAfter = Date.parse(leaf.validTo);
        view.messages++;
      });
      stream.on('error', (e: { details?: string }) => (view.ended = e.details ?? 'error'));
      cleanups.push(async () => stream.cancel());
    }

    const info = [
      `devcluster ${dc.url} (kubectl --kubeconfig ${kubeconfigPath} get pods -A)`,
      `CA 127.0.0.1:${ca.port} (TLS), workload certificate TTL ${options.certTtlSeconds}s`,
      `Broker API unix://${broker.brokerSocketPath}, CNI socket ${broker.cniEventSocketPath}, ops http://127.0.0.1:${broker.opsPort}/metrics`,
    ];
    const startedAt = Date.now();
    const tty = process.stdout.isTTY === true && options.print === undefined;
    let last = '';
    const tick = () => {
      const view = render(broker, consumers, startedAt, info);
      const comparable = view.replace(/^.*\n/, '').replace(/\b\d+m?\d*s( ago)?\b/g, '');
      if (tty) print(`\x1b[2J\x1b[H${view}`);
      else if (comparable !== last) print(view + '\n');
      last = comparable;
    };
    tick();
    const timer = setInterval(tick, options.intervalMs);
    cleanups.push(async () => clearInterval(timer));
    if (options.durationSeconds > 0) {
      const until = abortAfter(signal, options.durationSeconds * 1000, 'duration reached');
      cleanups.push(async () => until.dispose());
      await aborted(until.signal);
    } else {
      await aborted(signal);
    }
    tick();
  } finally {
    await stopAll();
    print('stopped: consumer, broker, CA and devcluster are down.');
  }
}
