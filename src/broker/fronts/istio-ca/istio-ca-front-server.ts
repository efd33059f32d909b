/**
 * Serves the Istio CA front: a grpc-js server on a TCP address (default `127.0.0.1:15012`) with
 * TLS from the front's serving identity (no client certificate: callers authenticate with their
 * bearer token, as at istiod), Istio's `IstioCertificateService` with the CA's own service
 * definition (an unreadable request is INVALID_ARGUMENT, not grpc-js's INTERNAL), gRPC health
 * (`""` and `istio.v1.auth.IstioCertificateService`) and reflection, like the CA.
 */
import { Server } from '@grpc/grpc-js';
import { caServiceDefinition } from '../../../ca/index.js';
import type { Logger } from '../../../core/log.js';
import { HealthService } from '../../../grpc/health.js';
import { addReflection } from '../../../grpc/reflection.js';
import { bindServer, stopServer } from '../../../grpc/server-lifecycle.js';
import { HEALTH_PROTO, WHOLE_SERVER } from '../../../protocol/grpc-health.js';
import { CA_PROTO, CA_SERVICE } from '../../../protocol/istio-ca.js';
import type { IstioCaFrontService } from './istio-ca-front.js';
import type { FrontServingIdentity } from './serving-identity.js';

/** Largest request message accepted (a CSR is a few KB), as the CA. */
const MAX_MESSAGE_BYTES = 256 * 1024;

export interface IstioCaFrontServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly service: IstioCaFrontService;
  readonly identity: FrontServingIdentity;
  readonly logger: Logger;
}

export interface IstioCaFrontServer {
  readonly port: number;
  readonly health: HealthService;
  /** SERVING / NOT_SERVING for the whole server and the CA service. */
  setServing(serving: boolean): void;
  stop(deadlineMs: number): Promise<void>;
}

export async function startIstioCaFrontServer(options: IstioCaFrontServerOptions): Promise<IstioCaFrontServer> {
  const server = new Server({ 'grpc.max_receive_message_length': MAX_MESSAGE_BYTES, 'grpc.enable_channelz': 0 });
  server.addService(caServiceDefinition(), options.service.implementation());
  const health = new HealthService({ [WHOLE_SERVER]: 'NOT_SERVING', [CA_SERVICE]: 'NOT_SERVING' });
  health.addToServer(server);
  addReflection(server, [CA_PROTO, HEALTH_PROTO]);
  const hostPart = options.host.includes(':') ? `[${options.host}]` : options.host;
  const port = await bindServer(server, `${hostPart}:${options.port}`, options.identity.credentials());
  options.logger.info('Istio CA front listening', { host: options.host, port });
  return {
    port,
    health,
    setServing(serving) {
      health.setStatus(WHOLE_SERVER, serving ? 'SERVING' : 'NOT_SERVING');
      health.setStatus(CA_SERVICE, serving ? 'SERVING' : 'NOT_SERVING');
    },
    async stop(deadlineMs) {
      health.shutdown();
      await stopServer(server, deadlineMs);
    },
  };
}
