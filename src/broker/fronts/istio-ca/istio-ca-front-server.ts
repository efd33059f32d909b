/**
 * Serves the Istio CA front on the CA's own HTTP/2 transport (`startHttp2Server` from src/ca: the
 * gRPC wire by hand, no grpc-js on the call path; on certbroker's own HTTP/2 engine, src/h2, by
 * default, or on node:http2 with `transport: 'http2'`), on a TCP address (default
 * `127.0.0.1:15012`) with TLS from the front's serving identity (no client certificate: callers
 * authenticate with their bearer token, as at istiod). Like the CA: an unreadable request is
 * INVALID_ARGUMENT (not INTERNAL), the connection, stream, header and time bounds of the CA's
 * limits apply, a connection finds no TLS while the serving certificate is withdrawn, gRPC
 * health (`""` and `istio.v1.auth.IstioCertificateService`) Check is answered there and Watch and
 * reflection are relayed to a grpc-js server on loopback.
 */
import { resolveLimits, startHttp2Server, type CaLimits } from '../../../ca/index.js';
import type { Clock } from '../../../core/clock.js';
import type { Logger } from '../../../core/log.js';
import { HealthService } from '../../../grpc/health.js';
import { WHOLE_SERVER } from '../../../protocol/grpc-health.js';
import { CA_SERVICE } from '../../../protocol/istio-ca.js';
import type { IstioCaFrontService } from './istio-ca-front.js';
import type { FrontServingIdentity } from './serving-identity.js';

/**
 * The CA's limits, with fewer connections and streams: on a node the front has one caller (the
 * node's ztunnel) and a few tools.
 */
const FRONT_LIMITS: CaLimits = resolveLimits({ maxConnections: 256, maxStreams: 1024 });

/** The front's HTTP/2 server: certbroker's own engine (`h2`, the CA's default too) or node:http2 (`http2`). */
export type IstioCaFrontTransport = 'h2' | 'http2';

export interface IstioCaFrontServerOptions {
  readonly host: string;
  /** 0 picks a free port. */
  readonly port: number;
  readonly service: IstioCaFrontService;
  readonly identity: FrontServingIdentity;
  readonly logger: Logger;
  readonly clock: Clock;
  /** Default `h2` (certbroker's engine); `http2`: node:http2 (the broker's ISTIO_CA_FRONT_TRANSPORT). */
  readonly transport?: IstioCaFrontTransport | undefined;
}

export interface IstioCaFrontServer {
  readonly port: number;
  readonly health: HealthService;
  /** SERVING / NOT_SERVING for the whole server and the CA service. */
  setServing(serving: boolean): void;
  stop(deadlineMs: number): Promise<void>;
}

export async function startIstioCaFrontServer(options: IstioCaFrontServerOptions): Promise<IstioCaFrontServer> {
  const health = new HealthService({ [WHOLE_SERVER]: 'NOT_SERVING', [CA_SERVICE]: 'NOT_SERVING' });
  const server = await startHttp2Server({
    host: options.host,
    port: options.port,
    identity: options.identity.serving,
    handler: options.service,
    health,
    limits: FRONT_LIMITS,
    logger: options.logger,
    clock: options.clock,
    engine: (options.transport ?? 'h2') === 'h2' ? 'h2' : 'node',
  });
  options.logger.info('Istio CA front listening', { host: options.host, port: server.port, transport: options.transport ?? 'h2' });
  return {
    port: server.port,
    health,
    setServing(serving) {
      health.setStatus(WHOLE_SERVER, serving ? 'SERVING' : 'NOT_SERVING');
      health.setStatus(CA_SERVICE, serving ? 'SERVING' : 'NOT_SERVING');
    },
    async stop(deadlineMs) {
      health.shutdown();
      await server.stop(deadlineMs);
    },
  };
}
