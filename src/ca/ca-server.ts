/**
 * Assembles the CA: signer, per-cluster authentication and node authorization, the
 * IstioCertificateService over gRPC (TLS with a serving certificate from its own signer, or
 * plaintext on request), grpc.health.v1, reflection, and the ops endpoint.
 */
import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';
import { systemClock } from '../core/clock.js';
import { ConfigError } from '../core/config.js';
import { createLogger } from '../core/log.js';
import { Secret } from '../core/secret.js';
import { HealthService } from '../grpc/health.js';
import { loadProtos, lookup } from '../grpc/proto-load.js';
import { addReflection } from '../grpc/reflection.js';
import { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import { bindServer, stopServer } from '../grpc/server-lifecycle.js';
import { startOpsServer, type Check, type OpsServer } from '../ops/ops-server.js';
import { HEALTH_PROTO, WHOLE_SERVER } from '../protocol/grpc-health.js';
import { CA_PROTO, CA_SERVICE } from '../protocol/istio-ca.js';
import { AuthenticatorChain, type Authenticator } from './authn/authenticator.js';
import { JwtAuthenticator } from './authn/jwt-verifier.js';
import { kubeTokenReviewer } from './authn/kube-token-reviewer.js';
import { discoveredJwks, originOf } from './authn/oidc-discovery.js';
import { RefusalCache } from './authn/refusal-cache.js';
import { TokenCache } from './authn/token-cache.js';
import { TokenReviewAuthenticator } from './authn/token-review.js';
import { CertificateService, MALFORMED_REQUEST, type ClusterAuth } from './certificate-service.js';
import { startH2Transport } from './h2-transport.js';
import { DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS, plaintextProblem, type CaServerConfig } from './config.js';
import { grpcJsLimitOptions } from './grpc-js-limits.js';
import { resolveLimits } from './limits.js';
import { CaMetrics } from './metrics.js';
import { NodeAuthorizer } from './node-authorizer.js';
import type { PodIndex } from './pod-index.js';
import { PodInformer } from './pod-informer.js';
import { kubeCaSecretStore } from './signers/ca-secret-store.js';
import { CacertsSigner } from './signers/cacerts-signer.js';
import { SelfSignedSigner } from './signers/self-signed-signer.js';
import { poolIssuerFactory } from './signers/pool-issuer.js';
import type { Signer } from './signer.js';

/** Serving certificate lifetime before clamping to the signer; renewed at half-life. */
const SERVING_CERT_TTL_SECONDS = 30 * 24 * 3600;
/** Skew allowed on JWT time claims when verifying locally. */
const JWT_CLOCK_TOLERANCE_SECONDS = 10;
/** Largest request message accepted (a CSR is a few KB). */
const MAX_MESSAGE_BYTES = 256 * 1024;
/** Refusals remembered per cluster (oldest first out): a flood of distinct forged tokens cannot grow it further. */
const MAX_REFUSALS = 10_000;

export interface CaServer {
  /** The bound gRPC port. */
  readonly port: number;
  /** The ops endpoint port, when served. */
  readonly opsPort: number | undefined;
  /** PEM roots clients must trust (the mesh roots; also what the serving cert chains to). */
  rootsPem(): string;
  /** True when the signer is loaded and every cluster's pod index has synced and is not stale. */
  readonly ready: boolean;
  readonly signer: Signer;
  readonly metrics: CaMetrics;
  /** The pod index of a cluster (tests wait on it). */
  podIndex(clusterId: string): PodIndex | undefined;
  /** Graceful stop within the configured grace, then forced. */
  stop(): Promise<void>;
}

/**
 * The service definition for grpc-js, with a request deserializer that never throws: bytes that
 * are not an IstioCertificateRequest become MALFORMED_REQUEST, which the handler refuses with
 * INVALID_ARGUMENT as the http2 transport does (grpc-js itself would answer INTERNAL).
 */
export function caServiceDefinition(): ServiceDefinition {
  const { grpcObject } = loadProtos([CA_PROTO]);
  const service = lookup<{ service: ServiceDefinition }>(grpcObject, CA_SERVICE).service;
  const out: Record<string, ServiceDefinition[string]> = {};
  for (const [name, method] of Object.entries(service)) {
    const decode = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer) => {
        try {
          return decode(bytes);
        } catch {
          return MALFORMED_REQUEST;
        }
      },
    };
  }
  return out as ServiceDefinition;
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
  const metrics = new CaMetrics({ defaultMetrics: config.opsPort !== undefined });
  const limits = resolveLimits(config.limits);
  const defaultCluster = config.clusters.find((c) => c.id === config.defaultClusterId);
  if (config.clusters.length > 0 && !defaultCluster) throw new Error(`default cluster ${config.defaultClusterId} is not among the configured clusters`);
  const plaintextRefused = plaintextProblem(config, { plaintext: 'plaintext', host: 'grpcHost' });
  if (plaintextRefused) throw new ConfigError([plaintextRefused]);
  const transport = config.transport === undefined || config.transport === 'auto' ? (config.plaintext ? 'grpc-js' : 'http2') : config.transport;
  if (transport === 'http2' && config.plaintext) throw new Error('the http2 transport serves TLS only; use the grpc-js transport for plaintext');

  // Signer.
  const materialOptions = {
    clock,
    logger,
    maxTtlSeconds: config.maxTtlSeconds,
    ...(config.signingWorkers > 0 ? { issuerFactory: poolIssuerFactory(config.signingWorkers) } : {}),
  };
  let signer: Signer;
  let startSigner: () => Promise<void>;
  const sc = config.signer;
  if (sc.kind === 'self-signed') {
    if (!defaultCluster) throw new Error('the self-signed signer needs a cluster to keep its Secret in');
    const s = new SelfSignedSigner({
      ...materialOptions,
      store: kubeCaSecretStore({ kubeConfig: defaultCluster.kubeConfig, namespace: sc.namespace, name: sc.secretName }),
      trustDomain: config.trustDomain,
      keyType: sc.keyType,
      rootTtlSeconds: sc.rootTtlSeconds,
    });
    signer = s;
    startSigner = () => s.start();
  } else if (sc.kind === 'cacerts') {
    const s = new CacertsSigner({ ...materialOptions, dir: sc.dir, ...(sc.pollIntervalMs !== undefined ? { pollIntervalMs: sc.pollIntervalMs } : {}) });
    signer = s;
    startSigner = () => s.start();
  } else {
    signer = sc.signer;
    startSigner = async () => undefined;
  }

  // Clusters: authentication chain, pod index, node authorizer.
  const informers: PodInformer[] = [];
  const clusters = new Map<string, ClusterAuth>();
  const podIndexes = new Map<string, PodIndex>();
  for (const c of config.clusters) {
    const cache = new TokenCache({ clock, ttlMs: config.tokenCacheSeconds * 1000, maxEntries: 50_000 });
    const refusals = new RefusalCache({ clock, ttlMs: (config.tokenNegativeCacheSeconds ?? DEFAULT_TOKEN_NEGATIVE_CACHE_SECONDS) * 1000, maxEntries: MAX_REFUSALS });
    const authenticators: Authenticator[] = [];
    if (c.tokenReview) {
      authenticators.push(
        new TokenReviewAuthenticator({
          clusterId: c.id,
          audiences: c.audiences,
          reviewer: kubeTokenReviewer(c.kubeConfig),
          cache,
          refusals,
          clock,
          onCacheLookup: (result) => (result === 'hit' ? metrics.cacheHit.inc() : metrics.tokenReviewCache.inc({ result })),
        }),
      );
    }
    if (c.oidc) {
      const user = c.kubeConfig.getCurrentUser();
      const kubeToken = c.oidc.useKubeCredentials && user?.token ? user.token : undefined;
      authenticators.push(
        new JwtAuthenticator({
          clusterId: c.id,
          issuer: c.oidc.issuer,
          audiences: c.audiences,
          algorithms: c.oidc.algorithms,
          keys: discoveredJwks({
            issuer: c.oidc.issuer,
            ...(c.oidc.discoveryUrl ? { discoveryUrl: c.oidc.discoveryUrl } : {}),
            ...(c.oidc.jwksUri ? { jwksUri: c.oidc.jwksUri } : {}),
            ...(c.oidc.caPem ? { caPem: c.oidc.caPem } : {}),
            // The CA's own token only ever goes to the API server's origin, whatever the
            // discovery document points at.
            ...(kubeToken ? { bearerToken: () => new Secret(kubeToken), ...apiServerOrigin(c.kubeConfig) } : {}),
          }),
          clock,
          cache,
          // Node clocks drift; accept iat/nbf/exp within a few seconds, as apiservers do.
          clockToleranceSeconds: JWT_CLOCK_TOLERANCE_SECONDS,
        }),
      );
    }
    const informer = new PodInformer({ kubeConfig: c.kubeConfig, clock, logger: logger.child({ cluster: c.id }), ...(config.informer ? { settings: config.informer } : {}) });
    metrics.informers.track(informer.informer, { cluster: c.id });
    informers.push(informer);
    podIndexes.set(c.id, informer);
    clusters.set(c.id, {
      id: c.id,
      authn: new AuthenticatorChain(authenticators, logger),
      authorizer: new NodeAuthorizer({ trustedNodeAccounts: config.trustedNodeAccounts, trustDomains: [config.trustDomain], pods: informer }),
    });
  }

  const service = new CertificateService({
    trustDomain: config.trustDomain,
    clusters,
    defaultClusterId: config.defaultClusterId,
    signer: () => signer,
    ttl: { defaultTtlSeconds: config.defaultTtlSeconds, maxTtlSeconds: config.maxTtlSeconds, backdateSeconds: 120 },
    clock,
    metrics,
    logger,
    maxCsrBytes: 64 * 1024,
    ...(config.grantableServingNames ? { grantableServingNames: config.grantableServingNames } : {}),
  });

  // Ready only with a pod index that can be trusted: listed, and not gone stale.
  const isReady = () => signer.ready && informers.every((i) => i.problem() === undefined);
  const health = new HealthService({ [WHOLE_SERVER]: 'NOT_SERVING', [CA_SERVICE]: 'NOT_SERVING' });
  const refreshHealth = () => {
    const s = isReady() ? 'SERVING' : 'NOT_SERVING';
    health.setStatus(WHOLE_SERVER, s);
    health.setStatus(CA_SERVICE, s);
    metrics.signerReady.set(signer.ready ? 1 : 0);
  };

  // Start the parts that talk to the outside world. The ops endpoint first: while the signer
  // is still loading (or refusing a bad stored root, retrying) /readyz already says why.
  let ops: OpsServer | undefined;
  if (config.opsPort !== undefined) {
    const readiness: Check[] = [
      { name: 'signer', check: () => signer.notReadyReason },
      ...informers.map((inf, i) => ({ name: `pods-${config.clusters[i]?.id ?? i}`, check: () => inf.problem() })),
    ];
    const liveness: Check[] = [{ name: 'signer', check: () => signer.brokenReason }];
    ops = await startOpsServer({ host: config.opsHost ?? '0.0.0.0', port: config.opsPort, registry: metrics.registry, liveness, readiness, logger });
  }
  for (const i of informers) i.start();
  const identity = new RotatingServerIdentity();
  let servingTimer: NodeJS.Timeout | undefined;
  // One issuance at a time. A request while one runs (new material arrived meanwhile) runs one
  // more after it, so the serving certificate always ends up from the current material.
  let rotating: Promise<void> | undefined;
  let again = false;
  const rotateServing = (): Promise<void> => {
    if (rotating) {
      again = true;
      return rotating;
    }
    rotating = (async () => {
      do {
        again = false;
        await issueServing();
      } while (again);
    })().finally(() => (rotating = undefined));
    return rotating;
  };
  const issueServing = async (): Promise<void> => {
    if (!signer.ready) return;
    const cert = await signer.issueServingCertificate({ dnsNames: config.servingDnsNames, ttlSeconds: SERVING_CERT_TTL_SECONDS });
    identity.update(cert.certChainPem, cert.privateKeyPem);
    logger.info('serving certificate issued', { dnsNames: config.servingDnsNames, notAfter: new Date(cert.notAfterMs).toISOString() });
    if (servingTimer) clearTimeout(servingTimer);
    const halfLife = Math.max(1000, (cert.notAfterMs - clock.now()) / 2);
    servingTimer = setTimeout(() => void rotateServing().catch((err: unknown) => logger.error('serving certificate rotation failed', { err })), Math.min(halfLife, 2 ** 31 - 1));
    servingTimer.unref();
  };
  const unsubscribe = signer.onChange(() => {
    refreshHealth();
    if (!config.plaintext) void rotateServing().catch((err: unknown) => logger.error('serving certificate rotation failed', { err }));
  });

  const startTransport = async (): Promise<{ port: number; stop: () => Promise<'graceful' | 'forced'> }> => {
    if (transport === 'http2') {
      // Health Watch/List and reflection stay on grpc-js, on loopback, relayed by the transport.
      const fallback = new Server({ 'grpc.enable_channelz': 0 });
      health.addToServer(fallback);
      addReflection(fallback, [CA_PROTO, HEALTH_PROTO]);
      const fallbackPort = await bindServer(fallback, '127.0.0.1:0', ServerCredentials.createInsecure());
      try {
        const h2t = await startH2Transport({
          fallbackPort,
          host: config.grpcHost,
          port: config.grpcPort,
          identity,
          service,
          health,
          logger,
          maxMessageBytes: MAX_MESSAGE_BYTES,
          limits,
          metrics,
        });
        return {
          port: h2t.port,
          stop: async () => {
            const how = await h2t.close(config.shutdownGraceMs);
            await stopServer(fallback, 100);
            return how;
          },
        };
      } catch (err) {
        await stopServer(fallback, 0);
        throw err;
      }
    }
    // Channelz bookkeeping costs CPU on every call and nothing reads it here.
    const server = new Server({
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.enable_channelz': 0,
      ...grpcJsLimitOptions(limits, () => metrics.streamsRefused.inc({ reason: 'body_timeout' })),
    });
    server.addService(caServiceDefinition(), service.implementation());
    health.addToServer(server);
    addReflection(server, [CA_PROTO, HEALTH_PROTO]);
    const creds = config.plaintext ? ServerCredentials.createInsecure() : identity.credentials();
    if (config.plaintext) logger.warn('gRPC is PLAINTEXT: for loopback development only');
    const hostPart = config.grpcHost.includes(':') ? `[${config.grpcHost}]` : config.grpcHost;
    const bound = await bindServer(server, `${hostPart}:${config.grpcPort}`, creds);
    return { port: bound, stop: () => stopServer(server, config.shutdownGraceMs) };
  };

  let port: number;
  let stopTransport: () => Promise<'graceful' | 'forced'>;
  // A stop requested during the start interrupts a signer that is still loading (or retrying).
  const startSignal = options.signal;
  const interrupt = () => void signer.close().catch(() => undefined);
  startSignal?.addEventListener('abort', interrupt, { once: true });
  const checkNotStopped = () => {
    if (startSignal?.aborted) throw startSignal.reason;
  };
  try {
    checkNotStopped();
    if (config.plaintext) {
      void startSigner().catch((err: unknown) => logger.error('signer failed to start', { err }));
    } else {
      await startSigner();
      checkNotStopped();
      // Installing the material already started an issuance (onChange): wait for that one.
      if (rotating) await rotating;
      else if (!identity.hasIdentity) await rotateServing();
    }
    checkNotStopped();
    ({ port, stop: stopTransport } = await startTransport());
    startSignal?.removeEventListener('abort', interrupt);
  } catch (err) {
    startSignal?.removeEventListener('abort', interrupt);
    // Nothing started here may outlive a failed start (a port in use, a signer that cannot load):
    // the caller must be able to exit.
    unsubscribe();
    if (servingTimer) clearTimeout(servingTimer);
    await Promise.all(informers.map((i) => i.stop().catch(() => undefined)));
    await signer.close().catch(() => undefined);
    await ops?.close();
    throw err;
  }
  logger.info('CA listening', { host: config.grpcHost, port, tls: !config.plaintext, transport, signer: signer.description });

  const healthTimer = setInterval(refreshHealth, 500);
  healthTimer.unref();
  refreshHealth();

  let stopped: Promise<void> | undefined;
  return {
    port,
    opsPort: ops?.port,
    rootsPem: () => signer.roots().join(''),
    get ready() {
      return isReady();
    },
    signer,
    metrics,
    podIndex: (id) => podIndexes.get(id),
    stop() {
      stopped ??= (async () => {
        clearInterval(healthTimer);
        if (servingTimer) clearTimeout(servingTimer);
        unsubscribe();
        health.shutdown();
        const how = await stopTransport();
        logger.info('CA stopped', { shutdown: how });
        await Promise.all(informers.map((i) => i.stop().catch(() => undefined)));
        await signer.close();
        await ops?.close();
      })();
      return stopped;
    },
  };
}

function apiServerOrigin(kubeConfig: { getCurrentCluster(): { server: string } | null }): { bearerTokenOrigin?: string } {
  const origin = originOf(kubeConfig.getCurrentCluster()?.server ?? '');
  return origin === undefined ? {} : { bearerTokenOrigin: origin };
}
