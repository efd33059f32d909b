/**
 * Serves the Broker API on a Unix socket with mTLS: the broker's own SVID (rotated by its own
 * certificate manager entry) as the serving certificate, the trust bundle as the client CA, a
 * client certificate required. gRPC health and reflection ride on the same server.
 */
import { chmodSync, rmSync } from 'node:fs';
import { experimental, Server } from '@grpc/grpc-js';
import { systemClock, type Clock } from '../../../core/clock.js';
import type { Logger } from '../../../core/log.js';
import { HealthService } from '../../../grpc/health.js';
import { addReflection } from '../../../grpc/reflection.js';
import { compressionFlagGuard } from '../../../grpc/request-guard.js';
import { bindServer, stopServer } from '../../../grpc/server-lifecycle.js';
import { HEALTH_PROTO, WHOLE_SERVER } from '../../../protocol/grpc-health.js';
import { BROKER_PROTO, BROKER_SERVICE } from '../../../protocol/spiffe-broker.js';
import { brokerServiceDefinition } from './broker-proto.js';
import type { BrokerApiService } from './broker-api.js';
import type { TrustBundle } from '../../cache/trust-bundle.js';
import { prepareSocketPath } from '../../adapters/unix-socket.js';
import { workloadCertPem, type WorkloadCert } from '../../cache/workload-cert.js';

type CaListener = experimental.CaCertificateUpdateListener;
type IdentityListener = experimental.IdentityCertificateUpdateListener;

export interface SelfCertificateProviderOptions {
  /** The broker's clock: decides when the identity has expired. Default: the system clock. */
  readonly clock?: Clock;
  /** Called when the identity served reaches its notAfter and is withdrawn. */
  readonly onExpired?: (cert: WorkloadCert) => void;
}

/**
 * A grpc-js CertificateProvider fed by the broker itself: identity = its own SVID, CA = the
 * trust bundle. One object serves both roles.
 *
 * It never presents an expired certificate: at the identity's notAfter (by the broker's clock)
 * it withdraws it, and an identity already past notAfter is never taken. Without an identity
 * grpc-js drops every new connection before the TLS handshake (nothing is presented at all);
 * connections opened earlier keep the session they negotiated.
 */
export class SelfCertificateProvider implements experimental.CertificateProvider {
  #ca: experimental.CaCertificateUpdate | null = null;
  #identity: experimental.IdentityCertificateUpdate | null = null;
  #notAfter: number | undefined;
  #expiry: AbortController | undefined;
  readonly #clock: Clock;
  readonly #onExpired: ((cert: WorkloadCert) => void) | undefined;
  readonly #caListeners = new Set<CaListener>();
  readonly #idListeners = new Set<IdentityListener>();

  constructor(options: SelfCertificateProviderOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#onExpired = options.onExpired;
  }

  /** Serves `cert` from now on; false (and nothing served) when it is already expired. */
  setIdentity(cert: WorkloadCert): boolean {
    this.#expiry?.abort();
    this.#expiry = undefined;
    if (this.#clock.now() >= cert.notAfter) {
      this.#withdraw();
      return false;
    }
    const { certChainPem, privateKeyPem } = workloadCertPem(cert);
    this.#identity = { certificate: Buffer.from(certChainPem), privateKey: Buffer.from(privateKeyPem.reveal()) };
    this.#notAfter = cert.notAfter;
    for (const l of this.#idListeners) l(this.#identity);
    const expiry = new AbortController();
    this.#expiry = expiry;
    this.#clock.sleep(cert.notAfter - this.#clock.now(), expiry.signal).then(
      () => {
        if (this.#expiry !== expiry) return;
        this.#expiry = undefined;
        this.#withdraw();
        this.#onExpired?.(cert);
      },
      () => undefined,
    );
    return true;
  }

  /** notAfter (ms since epoch) of the identity being served, undefined while none is. */
  get servingNotAfter(): number | undefined {
    return this.#notAfter;
  }

  /** Stops the expiry timer (shutdown). */
  close(): void {
    this.#expiry?.abort();
    this.#expiry = undefined;
  }

  #withdraw(): void {
    const had = this.#identity !== null;
    this.#identity = null;
    this.#notAfter = undefined;
    if (had) for (const l of this.#idListeners) l(null);
  }

  setRoots(bundle: TrustBundle): void {
    this.#ca = { caCertificate: Buffer.from(bundle.pem) };
    for (const l of this.#caListeners) l(this.#ca);
  }

  get hasIdentity(): boolean {
    return this.#identity !== null;
  }

  addCaCertificateListener(listener: CaListener): void {
    this.#caListeners.add(listener);
    // grpc-js registers its watcher only after this returns: deliver on the next microtask.
    queueMicrotask(() => {
      if (this.#ca && this.#caListeners.has(listener)) listener(this.#ca);
    });
  }
  removeCaCertificateListener(listener: CaListener): void {
    this.#caListeners.delete(listener);
  }
  addIdentityCertificateListener(listener: IdentityListener): void {
    this.#idListeners.add(listener);
    queueMicrotask(() => {
      if (this.#identity && this.#idListeners.has(listener)) listener(this.#identity);
    });
  }
  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.#idListeners.delete(listener);
  }
}

export interface BrokerApiServerOptions {
  /** Filesystem path of the Unix socket. */
  readonly socketPath: string;
  readonly service: BrokerApiService;
  readonly certificates: SelfCertificateProvider;
  readonly logger: Logger;
}

export interface BrokerApiServer {
  readonly health: HealthService;
  stop(deadlineMs: number): Promise<void>;
}

export async function startBrokerApiServer(options: BrokerApiServerOptions): Promise<BrokerApiServer> {
  const { socketPath } = options;
  prepareSocketPath(socketPath);
  const server = new Server({
    'grpc.keepalive_permit_without_calls': 1,
    // A request flagged compressed without grpc-encoding reaches the service as unreadable (INVALID_ARGUMENT).
    interceptors: [compressionFlagGuard(`/${BROKER_SERVICE}/`, options.logger)],
  });
  server.addService(brokerServiceDefinition(), options.service.implementation());
  const health = new HealthService({ [WHOLE_SERVER]: 'NOT_SERVING', [BROKER_SERVICE]: 'NOT_SERVING' });
  health.addToServer(server);
  addReflection(server, [BROKER_PROTO, HEALTH_PROTO]);
  // grpc-js names the parameters (ca, identity); one provider plays both roles.
  const credentials = experimental.createCertificateProviderServerCredentials(options.certificates, options.certificates, true);
  await bindServer(server, `unix://${socketPath}`, credentials);
  chmodSync(socketPath, 0o600);
  options.logger.info('Broker API listening', { socket: socketPath });
  return {
    health,
    async stop(deadlineMs: number) {
      health.shutdown();
      options.service.closeAll();
      await stopServer(server, deadlineMs);
      rmSync(socketPath, { force: true });
    },
  };
}
