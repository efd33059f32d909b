/**
 * Serves the Broker API on a Unix socket with mTLS: the broker's own SVID (rotated by its own
 * certificate manager entry) as the serving certificate, the trust bundle as the client CA, a
 * client certificate required. gRPC health and reflection ride on the same server.
 */
import { chmodSync, rmSync } from 'node:fs';
import { experimental, Server } from '@grpc/grpc-js';
import type { Logger } from '../core/log.js';
import { HEALTH_PROTO, HealthService } from '../grpc/health.js';
import { addReflection } from '../grpc/reflection.js';
import { compressionFlagGuard } from '../grpc/request-guard.js';
import { bindServer, stopServer } from '../grpc/server-lifecycle.js';
import { BROKER_PROTO, BROKER_SERVICE, brokerServiceDefinition } from './broker-proto.js';
import type { BrokerApiService } from './broker-api.js';
import type { TrustBundle } from './trust-bundle.js';
import { prepareSocketPath } from './unix-socket.js';
import { workloadCertPem, type WorkloadCert } from './workload-cert.js';

type CaListener = experimental.CaCertificateUpdateListener;
type IdentityListener = experimental.IdentityCertificateUpdateListener;

/**
 * A grpc-js CertificateProvider fed by the broker itself: identity = its own SVID, CA = the
 * trust bundle. One object serves both roles.
 */
export class SelfCertificateProvider implements experimental.CertificateProvider {
  #ca: experimental.CaCertificateUpdate | null = null;
  #identity: experimental.IdentityCertificateUpdate | null = null;
  readonly #caListeners = new Set<CaListener>();
  readonly #idListeners = new Set<IdentityListener>();

  setIdentity(cert: WorkloadCert): void {
    const { certChainPem, privateKeyPem } = workloadCertPem(cert);
    this.#identity = { certificate: Buffer.from(certChainPem), privateKey: Buffer.from(privateKeyPem.reveal()) };
    for (const l of this.#idListeners) l(this.#identity);
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
  const health = new HealthService({ '': 'NOT_SERVING', 'spiffe.broker.API': 'NOT_SERVING' });
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
