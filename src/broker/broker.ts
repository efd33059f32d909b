/**
 * `startBroker(config)`: the node broker wired from its parts — its own token (`OwnToken`), the
 * CA clients and the workload certificate manager (`workload-certs.ts`), its own SVID serving
 * the Broker API (`OwnIdentity`), the node pod watch and CNI registrations feeding `NodePods`,
 * the Broker API on a Unix socket with mTLS, the Istio CA front for released ztunnel when it is
 * on (`IstioCaFrontPart`), readiness (`BrokerReadiness`) and the ops
 * endpoint. Each part registers how it stops as it starts; `stop()` runs the staged `Shutdown`
 * (drain within the grace period, then force), as does a failed start.
 */
import { systemClock, type Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import { systemRng } from '../core/rng.js';
import { startOpsServer } from '../ops/ops-server.js';
import { WHOLE_SERVER } from '../protocol/grpc-health.js';
import { BROKER_SERVICE } from '../protocol/spiffe-broker.js';
import { kubernetesIdentity } from '../spiffe/kubernetes.js';
import { NamespaceWatch, watchedAmbientLookup } from './adapters/namespace-watch.js';
import { NodePodWatch, watchedSidecarPodLookup } from './adapters/node-pod-watch.js';
import { kubePodLookup } from './adapters/pod-lookup.js';
import { startRegistrationServer } from './adapters/registration-server.js';
import type { CertManager, IdentityStatus } from './cache/cert-manager.js';
import { NodePods, type TrackedPod } from './cache/node-pods.js';
import { TrustBundle } from './cache/trust-bundle.js';
import type { BrokerConfig } from './config.js';
import { BrokerApiService, type BrokerApiOptions } from './fronts/broker-api/broker-api.js';
import { attestorPidResolver } from './fronts/broker-api/workload-resolver.js';
import { nodeProcessAttestor } from './attestation/index.js';
import { startBrokerApiServer, type BrokerApiServer } from './fronts/broker-api/broker-api-server.js';
import { BrokerMetrics } from './metrics.js';
import { OwnIdentity } from './own-identity.js';
import type { OwnSvid } from './own-svid.js';
import { OwnToken } from './own-token.js';
import { BrokerReadiness } from './readiness.js';
import { Shutdown } from './shutdown.js';
import { WORKLOAD_API_DEFAULTS } from './workload-api-config.js';
import { startWorkloadApi } from './workload-api-wiring.js';
import { caClients, workloadCertManager } from './workload-certs.js';
import { CaTrust } from './ca-trust.js';
import { istioCaFrontOf, type IstioCaFrontPart } from './istio-ca-front-part.js';

export interface Broker {
  /** The broker's own SPIFFE ID. */
  readonly ownIdentity: string;
  readonly certs: CertManager;
  /** The own SVID's manager (one entry, `ownIdentity`). */
  readonly ownCerts: CertManager;
  /** The own SVID's state: ready, expired (Broker API refuses new connections) or missing. */
  ownSvid(): OwnSvid;
  readonly pods: NodePods;
  readonly bundle: TrustBundle;
  readonly metrics: BrokerMetrics;
  /** Ops endpoint port, when enabled. */
  readonly opsPort: number | undefined;
  readonly brokerSocketPath: string;
  readonly cniEventSocketPath: string;
  /** The Workload API socket, when it is served. */
  readonly workloadApiSocketPath: string | undefined;
  /** The Istio CA front's bound port, when it is on. */
  readonly istioCaFrontPort: number | undefined;
  /** The Istio CA front's serving-certificate manager (one entry: the own identity), when it is on. */
  readonly istioCaFrontCerts: CertManager | undefined;
  /** Ready: own token held, pod watch synced and not stale, own SVID held. */
  readonly ready: boolean;
  /** Identity statuses with their pods, for dumps and the live view (no keys). */
  snapshot(): Array<IdentityStatus & { readonly pods: readonly TrackedPod[] }>;
  /** Resolves when the broker is ready (or rejects when `signal` aborts first). */
  whenReady(signal?: AbortSignal): Promise<void>;
  stop(deadlineMs?: number): Promise<void>;
}

export interface BrokerStartOptions {
  /** Aborting it while the broker is still starting stops what started and rejects with its reason. */
  readonly signal?: AbortSignal;
}

export async function startBroker(config: BrokerConfig, options: BrokerStartOptions = {}): Promise<Broker> {
  const clock = config.clock ?? systemClock;
  const rng = config.rng ?? systemRng;
  const logger = config.logger.child({ component: 'broker', node: config.nodeName });
  const lifetime = new AbortController();
  const shutdown = new Shutdown(logger);
  const built: { certs?: CertManager; own?: OwnIdentity; bundle?: TrustBundle } = {};
  const metrics = new BrokerMetrics(() => built.certs, () => built.own?.svid() ?? MISSING_SVID, { processMetrics: config.ops !== undefined, bundle: () => built.bundle });
  const bundle = (built.bundle = trustBundleFor(config, { logger, clock, metrics }));

  const token = new OwnToken(config, { clock, rng, logger, onFetch: (outcome) => metrics.tokenRefreshes.inc({ outcome }) });
  shutdown.add('intake', 'own token', () => token.stop());
  token.start(lifetime.signal);
  const ca = caClients(config, token.source);
  const certs = (built.certs = workloadCertManager(config, { ca: ca.workloads, clock, rng, logger, metrics }));
  bundle.follow(certs);
  const caTrust = caTrustFor(config, bundle, { clock, logger, signal: lifetime.signal });
  caTrust.add(ca.workloads, ca.own);
  shutdown.add('work', 'workload certificates', () => {
    certs.stop();
    ca.workloads.close();
  });

  let api: BrokerApiServer | undefined;
  const ownIdentity = kubernetesIdentity(config.trustDomain, config.pod.namespace, config.pod.serviceAccount);
  const own = (built.own = new OwnIdentity({ identity: ownIdentity, ca: ca.own, bundle, clock, rng, logger, onServing: (on) => api && setServing(api, on) }));
  shutdown.add('work', 'own SVID', () => own.stop());
  own.start();

  const pods = new NodePods({ nodeName: config.nodeName, trustDomain: config.trustDomain, certs, now: () => clock.now(), ownPodUid: config.pod.uid });
  const watch = new NodePodWatch({
    kubeConfig: config.kubeConfig,
    nodeName: config.nodeName,
    pods,
    clock,
    rng,
    logger,
    metrics: metrics.informers,
    ...(config.informer ? { settings: config.informer } : {}),
  });
  shutdown.add('intake', 'node pod watch', () => watch.stop());
  // Namespace labels for the one-round-trip ambient ADD (until listed, that path answers "unknown").
  const namespaces = new NamespaceWatch({ kubeConfig: config.kubeConfig, clock, rng, logger, metrics: metrics.informers, ...(config.informer ? { settings: config.informer } : {}) });
  shutdown.add('intake', 'namespace watch', () => namespaces.stop());
  const service = brokerApiService(config, { pods, certs, bundle, clock, rng, logger, observer: metrics.apiObserver() });
  const front = istioCaFrontOf(config, { ownIdentity, tokens: token.source, pods, podsSynced: () => watch.synced, bundle, caTrust, registry: metrics.registry, clock, rng, logger });
  if (front) shutdown.add('work', 'Istio CA front certificate', () => front.close());
  const readiness = new BrokerReadiness({ token, podWatch: watch, ownSvid: own, ...(front ? { istioCaFront: front } : {}) });

  let opsPort: number | undefined;
  try {
    const checkNotStopped = () => {
      if (options.signal?.aborted) throw options.signal.reason;
    };
    checkNotStopped();
    namespaces.start();
    await watch.start(options.signal);
    checkNotStopped();
    const registration = await startRegistrationServer({
      socketPath: config.cniEventSocketPath,
      pods,
      lookup: kubePodLookup(config.kubeConfig),
      ambient: watchedAmbientLookup(watch, namespaces),
      sidecar: watchedSidecarPodLookup(watch),
      logger,
      observer: metrics.registrationObserver(),
    });
    shutdown.add('intake', 'CNI registrations', () => registration.close());
    const started = await startBrokerApiServer({ socketPath: config.brokerSocketPath, service, certificates: own.certificates, logger });
    shutdown.add('intake', 'Broker API', (deadlineMs) => started.stop(deadlineMs));
    api = started;
    if (config.workloadApiSocketPath) {
      const w = { socketPath: config.workloadApiSocketPath, pods, certs, bundle, clock, rng, logger, updateJitterMs: config.updateJitterMs };
      const workloadApi = await startWorkloadApi({ ...w, settings: config.workloadApi ?? WORKLOAD_API_DEFAULTS, metrics: metrics.workloadApi });
      shutdown.add('intake', 'Workload API', (deadlineMs) => workloadApi.stop(deadlineMs));
    }
    if (own.serving) setServing(started, true);
    if (front) shutdown.add('intake', 'Istio CA front', await front.serve());
    if (config.ops) {
      const { host, port } = config.ops;
      const ops = await startOpsServer({ host, port, registry: metrics.registry, readiness: readiness.checks, liveness: [], logger });
      shutdown.add('ops', 'ops endpoint', () => ops.close());
      opsPort = ops.port;
    }
  } catch (err) {
    lifetime.abort();
    await shutdown.run(0);
    throw err;
  }
  const sockets = { brokerSocket: config.brokerSocketPath, cniSocket: config.cniEventSocketPath, workloadApiSocket: config.workloadApiSocketPath };
  logger.info('node broker started', { ownIdentity, ...sockets, ...(front ? { istioCaFront: front.address } : {}) });
  const stop = (deadlineMs: number) => {
    lifetime.abort();
    return shutdown.run(deadlineMs).then(() => logger.info('node broker stopped'));
  };
  return brokerHandle(config, { ownIdentity, certs, own, pods, bundle, metrics, opsPort, readiness, front, stop });
}

const MISSING_SVID: OwnSvid = Object.freeze({ state: 'missing', notAfter: undefined });

/**
 * The Broker API service: the caller allow-lists (the API's and each reference kind's), PID
 * references resolved from this node's /proc (the attestation room: pid -> cgroup -> pod).
 */
/** The trust bundle: a dropped root goes once re-issued leaves had one update window to reach every stream. */
function trustBundleFor(config: BrokerConfig, deps: { readonly logger: Logger; readonly clock: Clock; readonly metrics: BrokerMetrics }): TrustBundle {
  return TrustBundle.fromPem(config.trustDomain, config.ca.rootsPem, {
    logger: deps.logger,
    clock: deps.clock,
    settleMs: config.updateJitterMs,
    observer: deps.metrics.trustBundle.observer(),
  });
}

/** The CA's TLS certificate may move to a new root: trusted from the bundle or the root file (followed while `signal` is live). */
function caTrustFor(config: BrokerConfig, bundle: TrustBundle, deps: { readonly clock: Clock; readonly logger: Logger; readonly signal: AbortSignal }): CaTrust {
  const trust = new CaTrust(bundle, config.ca.rootsPem);
  if (config.ca.rootFile) trust.followFile(config.ca.rootFile, { ...deps, ...(config.ca.rootFilePollMs !== undefined ? { pollIntervalMs: config.ca.rootFilePollMs } : {}) });
  return trust;
}

function brokerApiService(config: BrokerConfig, deps: Omit<BrokerApiOptions, 'allowedCallers' | 'referenceCallers' | 'pids' | 'updateJitterMs'>): BrokerApiService {
  return new BrokerApiService({
    ...deps,
    allowedCallers: config.allowedCallers,
    ...(config.referenceCallers ? { referenceCallers: config.referenceCallers } : {}),
    pids: attestorPidResolver(nodeProcessAttestor()),
    updateJitterMs: config.updateJitterMs,
  });
}

/**
 * The Broker API serves while it has a valid own SVID (whichever comes first: the SVID or the
 * server). At the SVID's notAfter the provider withdraws it: new connections are refused until
 * the renewal (retried every few seconds by then, refresh-policy.ts) arrives.
 */
function setServing(api: BrokerApiServer, serving: boolean): void {
  api.health.setStatus(WHOLE_SERVER, serving ? 'SERVING' : 'NOT_SERVING');
  api.health.setStatus(BROKER_SERVICE, serving ? 'SERVING' : 'NOT_SERVING');
}

/** What `startBroker` hands back: the parts, readiness and a `stop` that runs once. */
function brokerHandle(
  config: BrokerConfig,
  parts: {
    readonly ownIdentity: string;
    readonly certs: CertManager;
    readonly own: OwnIdentity;
    readonly pods: NodePods;
    readonly bundle: TrustBundle;
    readonly metrics: BrokerMetrics;
    readonly opsPort: number | undefined;
    readonly readiness: BrokerReadiness;
    readonly front: IstioCaFrontPart | undefined;
    readonly stop: (deadlineMs: number) => Promise<void>;
  },
): Broker {
  const { certs, pods, readiness, own } = parts;
  let stopped: Promise<void> | undefined;
  return {
    ownIdentity: parts.ownIdentity,
    certs,
    ownCerts: own.certs,
    ownSvid: () => own.svid(),
    pods,
    bundle: parts.bundle,
    metrics: parts.metrics,
    opsPort: parts.opsPort,
    brokerSocketPath: config.brokerSocketPath,
    cniEventSocketPath: config.cniEventSocketPath,
    workloadApiSocketPath: config.workloadApiSocketPath,
    istioCaFrontPort: parts.front?.port,
    istioCaFrontCerts: parts.front?.certs,
    get ready() {
      return readiness.ready;
    },
    snapshot: () => certs.statuses().map((s) => ({ ...s, pods: pods.podsOf(s.identity) })),
    whenReady: (signal?: AbortSignal) => readiness.whenReady(signal),
    stop(deadlineMs = config.shutdownGraceMs) {
      stopped ??= parts.stop(deadlineMs);
      return stopped;
    },
  };
}
