/**
 * The CA's wiring, and nothing else: signer (signers/signer-factory.ts), per-cluster auth
 * (cluster-auth.ts), CertificateService, serving identity (serving-identity.ts, TLS only),
 * event-driven readiness (readiness.ts), ops endpoint, transport (transports.ts). Start order:
 * ops (so /readyz says why while the signer loads), pod informers, signer, first serving
 * certificate, transport; a failed or aborted start stops everything it started.
 */
import { systemClock } from '../core/clock.js';
import { createLogger } from '../core/log.js';
import { HealthService } from '../grpc/health.js';
import { startOpsServer } from '../ops/ops-server.js';
import { WHOLE_SERVER } from '../protocol/grpc-health.js';
import { CA_SERVICE } from '../protocol/istio-ca.js';
import { CertificateService } from './certificate-service.js';
import { assembleClusters } from './cluster-auth.js';
import { checkServerConfig, DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS, type CaServerConfig } from './config.js';
import { resolveLimits } from './limits.js';
import { CaMetrics } from './metrics.js';
import type { PodIndex } from './pod-index.js';
import { caReadinessConditions, healthPublisher, ReadinessGate } from './readiness.js';
import { ServingIdentity } from './serving-identity.js';
import type { Signer } from './signer.js';
import { createSigner } from './signers/signer-factory.js';
import { publisherFor, type TrustBundlePublisher } from './publish/trust-bundle-publisher.js';
import { startTransport, type CaTransport } from './transports.js';

export interface CaServer {
  /** The bound gRPC port. */
  readonly port: number;
  /** The ops endpoint port, when served. */
  readonly opsPort: number | undefined;
  /** PEM roots clients must trust (the mesh roots; also what the serving cert chains to). */
  rootsPem(): string;
  /** True when the signer is loaded, the serving certificate (TLS) is presented, and every cluster's pod index has synced and is not stale. */
  readonly ready: boolean;
  readonly signer: Signer;
  readonly metrics: CaMetrics;
  /** The pod index of a cluster (tests wait on it). */
  podIndex(clusterId: string): PodIndex | undefined;
  /** The trust-bundle publisher (config.publish), undefined when not publishing. */
  readonly publisher: TrustBundlePublisher | undefined;
  /** Graceful stop within the configured grace, then forced. */
  stop(): Promise<void>;
}

export interface CaStartOptions {
  /**
   * Aborting it while the CA is still starting (e.g. SIGTERM while the signer retries loading
   * its root) stops the start: everything started so far is stopped and the promise rejects
   * with the signal's reason.
   */
  readonly signal?: AbortSignal;
}

export async function startCaServer(config: CaServerConfig, options: CaStartOptions = {}): Promise<CaServer> {
  const clock = config.clock ?? systemClock;
  const logger = (config.logger ?? createLogger()).child({ component: 'ca' });
  const kind = checkServerConfig(config);
  const metrics = new CaMetrics({ defaultMetrics: config.opsPort !== undefined });
  // The factory and the assembly read their settings (trustDomain, maxTtlSeconds, ...) from the config.
  const defaultCluster = config.clusters.find((c) => c.id === config.defaultClusterId);
  const { signer, start: startSigner } = createSigner(config.signer, { ...config, clock, logger, defaultCluster });
  metrics.observeSigner(signer);
  const clusters = assembleClusters(config.clusters, { ...config, tokenNegativeCacheSeconds: config.tokenNegativeCacheSeconds ?? DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS, clock, logger, metrics });
  const service = new CertificateService({
    trustDomain: config.trustDomain,
    clusters: clusters.auth,
    defaultClusterId: config.defaultClusterId,
    signer: () => signer,
    ttl: { defaultTtlSeconds: config.defaultTtlSeconds, maxTtlSeconds: config.maxTtlSeconds, backdateSeconds: 120 },
    clock,
    metrics,
    logger,
    maxCsrBytes: 64 * 1024,
    ...(config.grantableServingNames ? { grantableServingNames: config.grantableServingNames } : {}),
  });
  const serving = config.plaintext ? undefined : new ServingIdentity({ signer, dnsNames: config.servingDnsNames, clock, logger });
  const health = new HealthService({ [WHOLE_SERVER]: 'NOT_SERVING', [CA_SERVICE]: 'NOT_SERVING' });
  const readiness = new ReadinessGate({ conditions: caReadinessConditions({ signer, serving, podIndexes: clusters.podIndexes }), publish: healthPublisher(health), logger });
  readiness.start();

  const ops = config.opsPort === undefined ? undefined : await startOpsServer({
    host: config.opsHost ?? '0.0.0.0',
    port: config.opsPort,
    registry: metrics.registry,
    liveness: [{ name: 'signer', check: () => signer.brokenReason }],
    readiness: readiness.checks(),
    logger,
  });
  clusters.start();
  const stopParts = async (): Promise<void> => {
    await serving?.stop();
    await clusters.stop();
    await signer.close();
    await ops?.close();
  };

  // A stop requested during the start interrupts a signer that is still loading (or retrying).
  const { signal } = options;
  const interrupt = () => void signer.close().catch(() => undefined);
  signal?.addEventListener('abort', interrupt, { once: true });
  const checkNotStopped = () => {
    if (signal?.aborted) throw signal.reason;
  };
  let transport: CaTransport;
  try {
    checkNotStopped();
    if (serving) {
      await startSigner();
      checkNotStopped();
      await serving.start();
    } else {
      void startSigner().catch((err: unknown) => logger.error('signer failed to start', { err }));
    }
    checkNotStopped();
    transport = await startTransport(kind, { host: config.grpcHost, port: config.grpcPort, identity: serving?.identity, service, health, limits: resolveLimits(config.limits), metrics, logger, clock });
  } catch (err) {
    // Nothing started here may outlive a failed start (a port in use, a signer that cannot load):
    // the caller must be able to exit.
    readiness.stop();
    await stopParts().catch(() => undefined);
    throw err;
  } finally {
    signal?.removeEventListener('abort', interrupt);
  }
  const publisher = publisherFor(config, { signer, cluster: defaultCluster, registry: metrics.registry, clock, logger }); // the Lease holder publishes
  await publisher?.start();
  logger.info('CA listening', { host: config.grpcHost, port: transport.port, tls: serving !== undefined, transport: kind, signer: signer.description });

  let stopped: Promise<void> | undefined;
  return {
    port: transport.port,
    opsPort: ops?.port,
    rootsPem: () => signer.roots().join(''),
    get ready() {
      return readiness.ready;
    },
    signer,
    metrics,
    podIndex: (id) => clusters.podIndex(id),
    publisher,
    stop() {
      stopped ??= (async () => {
        await publisher?.stop();
        readiness.stop();
        health.shutdown();
        const how = await transport.stop(config.shutdownGraceMs);
        logger.info('CA stopped', { shutdown: how });
        await stopParts();
      })();
      return stopped;
    },
  };
}
