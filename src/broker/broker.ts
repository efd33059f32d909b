/**
 * `startBroker(config)`: the node broker assembled from its parts — own token (TokenRequest),
 * own SVID (from the CA without impersonation; serves the Broker API), the node pod watch and
 * CNI registrations feeding the certificate manager, the Broker API on a Unix socket with mTLS,
 * and the ops endpoint. `stop()` drains within the grace period, then forces.
 */
import { systemClock } from '../core/clock.js';
import { describeError } from '../core/errors.js';
import { systemRng } from '../core/rng.js';
import { startOpsServer, type OpsServer } from '../ops/ops-server.js';
import { WHOLE_SERVER } from '../protocol/grpc-health.js';
import { BROKER_SERVICE } from '../protocol/spiffe-broker.js';
import { kubernetesIdentity } from '../spiffe/kubernetes.js';
import { BrokerApiService } from './fronts/broker-api/broker-api.js';
import { SelfCertificateProvider, startBrokerApiServer, type BrokerApiServer } from './fronts/broker-api/broker-api-server.js';
import { IstioCaClient } from './adapters/ca-client.js';
import { CertManager, type IdentityStatus } from './cache/cert-manager.js';
import { BrokerError } from './errors.js';
import type { BrokerConfig } from './config.js';
import { NodePodWatch } from './adapters/node-pod-watch.js';
import { kubePodLookup } from './adapters/pod-lookup.js';
import { projectedTokenFileFetcher, tokenRequestFetcher } from './adapters/token-fetchers.js';
import { BrokerMetrics } from './metrics.js';
import type { WorkloadApiServer } from './fronts/index.js';
import { startWorkloadApi } from './workload-api-wiring.js';
import { NodePods, type TrackedPod } from './cache/node-pods.js';
import { ownSvidOf, ownSvidProblem, type OwnSvid } from './own-svid.js';
import { startRegistrationServer, type RegistrationServer } from './adapters/registration-server.js';
import { TokenSource, type TokenFetcher } from './adapters/token-source.js';
import { TrustBundle } from './cache/trust-bundle.js';
import { describeCert } from './cache/workload-cert.js';

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
  /** Ready: own token held, pod watch synced and not stale, own SVID held. */
  readonly ready: boolean;
  /** Identity statuses with their pods, for dumps and the live view (no keys). */
  snapshot(): Array<IdentityStatus & { readonly pods: readonly TrackedPod[] }>;
  /** Resolves when the broker is ready (or rejects when `signal` aborts first). */
  whenReady(signal?: AbortSignal): Promise<void>;
  stop(deadlineMs?: number): Promise<void>;
}

/** The broker's own token: the projected file alone, or TokenRequest with the projected file (if any) as fallback. */
function ownTokenFetchers(config: BrokerConfig): { primary: TokenFetcher; fallback?: TokenFetcher } {
  const file = config.tokenFile ? projectedTokenFileFetcher(config.tokenFile) : undefined;
  if (config.tokenSource === 'file') {
    if (!file) throw new BrokerError('ERR_TOKEN_UNAVAILABLE', "tokenSource 'file' needs tokenFile", { status: 'invalid-argument' });
    return { primary: file };
  }
  const primary = tokenRequestFetcher(config.kubeConfig, {
    pod: config.pod,
    audience: config.ca.audience,
    expirationSeconds: config.tokenExpirationSeconds,
  });
  return file ? { primary, fallback: file } : { primary };
}

export interface BrokerStartOptions {
  /** Aborting it while the broker is still starting stops what started and rejects with its reason. */
  readonly signal?: AbortSignal;
}

export async function startBroker(config: BrokerConfig, options: BrokerStartOptions = {}): Promise<Broker> {
  const clock = config.clock ?? systemClock;
  const rng = config.rng ?? systemRng;
  const logger = config.logger.child({ component: 'broker', node: config.nodeName });
  const stopping = new AbortController();
  let registration: RegistrationServer | undefined;
  let api: BrokerApiServer | undefined;
  let workloadApi: WorkloadApiServer | undefined;
  let ops: OpsServer | undefined;
  const bundle = TrustBundle.fromPem(config.trustDomain, config.ca.rootsPem, { logger });
  let certsRef: CertManager | undefined;
  let ownSvidRef: (() => OwnSvid) | undefined;
  const metrics = new BrokerMetrics(
    () => certsRef,
    () => ownSvidRef?.() ?? { state: 'missing', notAfter: undefined },
  );

  const tokens = new TokenSource({
    ...ownTokenFetchers(config),
    clock,
    rng,
    logger,
    onFetch: (outcome) => metrics.tokenRefreshes.inc({ outcome }),
  });
  const tokenLoop = tokens.run(stopping.signal);

  const caBase = {
    address: config.ca.address,
    caRootsPem: config.ca.rootsPem,
    ...(config.ca.tlsServerName ? { tlsServerName: config.ca.tlsServerName } : {}),
    tokens,
    clusterId: config.ca.clusterId,
    certTtlSeconds: config.ca.certTtlSeconds,
  };
  const workloadCa = new IstioCaClient({ ...caBase, impersonate: true });
  const ownCa = new IstioCaClient({ ...caBase, impersonate: false });

  const certs = new CertManager({
    ca: workloadCa,
    clock,
    rng,
    logger,
    maxConcurrentFetches: config.maxConcurrentFetches,
    forgetGraceMs: config.forgetGraceMs,
    observer: [
      metrics.certObserver(),
      {
        fetchFailed: (identity, err, _ms, next) =>
          logger.warn('certificate fetch failed', { identity, err: describeError(err), retryInMs: Math.round(next) }),
        expired: (_identity, cert) => logger.warn('certificate expired; not served until renewed', describeCert(cert)),
      },
    ],
  });
  certsRef = certs;
  bundle.follow(certs);

  // Own SVID: its own manager entry (no impersonation), rotated like any other.
  const ownIdentity = kubernetesIdentity(config.trustDomain, config.pod.namespace, config.pod.serviceAccount);
  const ownCerts = new CertManager({
    ca: ownCa,
    clock,
    rng,
    logger,
    maxConcurrentFetches: 1,
    observer: {
      fetchFailed: (identity, err, _ms, next) =>
        logger.warn('own SVID fetch failed', { identity, err: describeError(err), retryInMs: Math.round(next) }),
    },
  });
  bundle.follow(ownCerts);
  const ownSvid = (): OwnSvid => ownSvidOf(ownCerts.status(ownIdentity), clock.now());
  ownSvidRef = ownSvid;
  // The Broker API serves while it has a valid own SVID (whichever comes first: the SVID or the
  // server). At the SVID's notAfter the provider withdraws it: new connections are refused
  // until the renewal (retried every few seconds by then, refresh-policy.ts) arrives.
  const setServing = (serving: boolean) => {
    api?.health.setStatus(WHOLE_SERVER, serving ? 'SERVING' : 'NOT_SERVING');
    api?.health.setStatus(BROKER_SERVICE, serving ? 'SERVING' : 'NOT_SERVING');
  };
  const provider = new SelfCertificateProvider({
    clock,
    onExpired: (cert) => {
      logger.error('own SVID expired; the Broker API refuses new connections until it is renewed', describeCert(cert));
      setServing(false);
    },
  });
  provider.setRoots(bundle);
  bundle.onChange(() => provider.setRoots(bundle));
  ownCerts.retain(ownIdentity, 'self', 'realtime');
  ownCerts.subscribe(ownIdentity, (ev) => {
    if (ev.type !== 'updated') return;
    if (!provider.setIdentity(ev.cert)) return; // already expired: the certificate manager refuses those
    logger.info('own SVID ready', describeCert(ev.cert));
    setServing(true);
  });

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

  const service = new BrokerApiService({
    pods,
    certs,
    bundle,
    allowedCallers: config.allowedCallers,
    clock,
    rng,
    logger,
    updateJitterMs: config.updateJitterMs,
    observer: metrics.apiObserver(),
  });

  const readiness = [
    { name: 'token', check: () => (tokens.ready ? undefined : `no valid token${tokens.lastError ? `: ${tokens.lastError}` : ''}`) },
    { name: 'pod-watch', check: () => watch.problem() },
    { name: 'own-svid', check: () => ownSvidProblem(ownSvid()) },
  ];
  const isReady = () => readiness.every((c) => c.check() === undefined);

  const stopAll = async (deadlineMs: number) => {
    stopping.abort();
    await Promise.allSettled([registration?.close(), api?.stop(deadlineMs), workloadApi?.stop(deadlineMs), watch.stop()]);
    certs.stop();
    ownCerts.stop();
    provider.close();
    workloadCa.close();
    ownCa.close();
    await tokenLoop.catch(() => undefined);
    await ops?.close();
  };

  const startSignal = options.signal;
  const checkNotStopped = () => {
    if (startSignal?.aborted) throw startSignal.reason;
  };
  try {
    checkNotStopped();
    await watch.start(startSignal);
    checkNotStopped();
    registration = await startRegistrationServer({
      socketPath: config.cniEventSocketPath,
      pods,
      lookup: kubePodLookup(config.kubeConfig),
      logger,
      observer: metrics.registrationObserver(),
    });
    api = await startBrokerApiServer({ socketPath: config.brokerSocketPath, service, certificates: provider, logger });
    if (config.workloadApiSocketPath) {
      const w = { socketPath: config.workloadApiSocketPath, pods, certs, bundle, clock, rng, logger, updateJitterMs: config.updateJitterMs };
      workloadApi = await startWorkloadApi({ ...w, metrics: metrics.workloadApi });
    }
    if (provider.hasIdentity) setServing(true);
    if (config.ops) {
      ops = await startOpsServer({
        host: config.ops.host,
        port: config.ops.port,
        registry: metrics.registry,
        readiness,
        liveness: [],
        logger,
      });
    }
  } catch (err) {
    await stopAll(0);
    throw err;
  }
  logger.info('node broker started', { ownIdentity, brokerSocket: config.brokerSocketPath, cniSocket: config.cniEventSocketPath });

  let stopped: Promise<void> | undefined;
  return {
    ownIdentity,
    certs,
    ownCerts,
    ownSvid,
    pods,
    bundle,
    metrics,
    opsPort: ops?.port,
    brokerSocketPath: config.brokerSocketPath,
    cniEventSocketPath: config.cniEventSocketPath,
    workloadApiSocketPath: config.workloadApiSocketPath,
    get ready() {
      return isReady();
    },
    snapshot() {
      return certs.statuses().map((s) => ({ ...s, pods: pods.podsOf(s.identity) }));
    },
    async whenReady(signal?: AbortSignal) {
      while (!isReady()) {
        if (signal?.aborted) throw signal.reason;
        await new Promise((r) => setTimeout(r, 50).unref());
      }
    },
    stop(deadlineMs = config.shutdownGraceMs) {
      stopped ??= stopAll(deadlineMs).then(() => logger.info('node broker stopped'));
      return stopped;
    },
  };
}
