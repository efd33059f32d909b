/**
 * The CA's gRPC transports behind one small interface: `startTransport(kind, parts)` binds the
 * IstioCertificateService, grpc.health.v1 and reflection and returns `{ kind, port, stop }`.
 * - `h2` (the default with TLS): CreateCertificate and health Check served directly on
 *   certbroker's own HTTP/2 engine (src/h2, h2-transport.ts); health Watch/List and reflection
 *   relayed to a grpc-js server on loopback.
 * - `http2`: the same on node:http2 (nghttp2) in place of the engine.
 * - `grpc-js` (plaintext, or `CA_TRANSPORT=grpc-js`): everything on a grpc-js Server, with the
 *   limits grpc-js can apply (grpc-js-limits.ts).
 * Both hand calls to the same CertificateService and answer errors through the one mapping.
 * `startHttp2Server` is the http2/h2 one for any `CreateCertificateHandler`: the broker's Istio
 * CA front serves on it too.
 */
import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { HealthService } from '../grpc/health.js';
import { decodeIstioCertificateRequest } from '../grpc/istio-ca-request.js';
import { loadProtos, lookup } from '../grpc/proto-load.js';
import { addReflection } from '../grpc/reflection.js';
import type { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import { bindServer, stopServer } from '../grpc/server-lifecycle.js';
import { HEALTH_PROTO } from '../protocol/grpc-health.js';
import { CA_PROTO, CA_SERVICE, CREATE_CERTIFICATE_METHOD } from '../protocol/istio-ca.js';
import { MALFORMED_REQUEST, type CertificateService } from './certificate-service.js';
import { transportKind } from './config.js';
import { grpcJsLimitOptions } from './grpc-js-limits.js';
import type { H2Engine } from './h2-fronts.js';
import { startH2Transport, type CreateCertificateHandler } from './h2-transport.js';
import type { CaLimits } from './limits.js';
import type { CaMetrics } from './metrics.js';

/** Largest request message accepted (a CSR is a few KB). */
export const MAX_MESSAGE_BYTES = 256 * 1024;

export type TransportKind = ReturnType<typeof transportKind>;
export { transportKind };

export interface CaTransport {
  readonly kind: TransportKind;
  /** The bound port. */
  readonly port: number;
  /** Stops accepting, lets open calls finish within `graceMs`, then forces. */
  stop(graceMs: number): Promise<'graceful' | 'forced'>;
}

export interface TransportParts {
  readonly host: string;
  readonly port: number;
  /** The serving identity; absent = plaintext (grpc-js only). */
  readonly identity: RotatingServerIdentity | undefined;
  readonly service: CertificateService;
  readonly health: HealthService;
  readonly limits: CaLimits;
  readonly metrics: CaMetrics;
  readonly logger: Logger;
  readonly clock: Clock;
}

export function startTransport(kind: TransportKind, parts: TransportParts): Promise<CaTransport> {
  return kind === 'grpc-js' ? startGrpcJs(parts) : startHttp2(parts, kind);
}

/**
 * The service definition for grpc-js, with a request deserializer that never throws: bytes that
 * are not an IstioCertificateRequest become MALFORMED_REQUEST, which the handler refuses with
 * INVALID_ARGUMENT as the http2 transport does (grpc-js itself would answer INTERNAL).
 * CreateCertificate is read by the one decoder every CA transport uses (decodeIstioCertificateRequest),
 * so all three hand the handler the same request object and refuse the same bytes (the shared
 * deserializers are strict too, src/grpc/strict-decode.ts, but the hand decoder refuses three
 * malformed shapes protobufjs takes and is the CA's per-call decode).
 */
export function caServiceDefinition(): ServiceDefinition {
  const { grpcObject } = loadProtos([CA_PROTO]);
  const service = lookup<{ service: ServiceDefinition }>(grpcObject, CA_SERVICE).service;
  const out: Record<string, ServiceDefinition[string]> = {};
  for (const [name, method] of Object.entries(service)) {
    const decode = name === CREATE_CERTIFICATE_METHOD ? decodeIstioCertificateRequest : method.requestDeserialize;
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

/**
 * What `startHttp2Server` needs: the CA's parts, or the broker's Istio CA front's (its own
 * handler, health, identity and limits; no transport metrics).
 */
export interface Http2ServerParts {
  readonly host: string;
  readonly port: number;
  readonly identity: RotatingServerIdentity;
  readonly handler: CreateCertificateHandler;
  readonly health: HealthService;
  readonly limits: CaLimits;
  readonly metrics?: CaMetrics;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The HTTP/2 engine: node:http2 (default) or certbroker's own (`h2`, the `h2` kind). */
  readonly engine?: H2Engine;
}

export interface Http2Server {
  readonly port: number;
  /** Stops accepting, lets open calls finish within `graceMs` (GOAWAY), then forces. */
  stop(graceMs: number): Promise<'graceful' | 'forced'>;
}

/**
 * The Istio CA protocol over TLS on node:http2: CreateCertificate (to `handler`) and health
 * Check served by h2-transport.ts; health Watch/List and reflection (CA and health protos) on a
 * grpc-js server on loopback, relayed.
 */
export async function startHttp2Server(p: Http2ServerParts): Promise<Http2Server> {
  // Health Watch/List and reflection stay on grpc-js, on loopback, relayed by the transport.
  const fallback = new Server({ 'grpc.enable_channelz': 0 });
  p.health.addToServer(fallback);
  addReflection(fallback, [CA_PROTO, HEALTH_PROTO]);
  const fallbackPort = await bindServer(fallback, '127.0.0.1:0', ServerCredentials.createInsecure());
  try {
    const h2t = await startH2Transport({
      fallbackPort,
      host: p.host,
      port: p.port,
      identity: p.identity,
      handler: p.handler,
      health: p.health,
      logger: p.logger,
      clock: p.clock,
      maxMessageBytes: MAX_MESSAGE_BYTES,
      limits: p.limits,
      ...(p.metrics ? { metrics: p.metrics } : {}),
    }, p.engine);
    return {
      port: h2t.port,
      stop: async (graceMs) => {
        const how = await h2t.close(graceMs);
        await stopServer(fallback, 100);
        return how;
      },
    };
  } catch (err) {
    await stopServer(fallback, 0);
    throw err;
  }
}

async function startHttp2(p: TransportParts, kind: 'http2' | 'h2'): Promise<CaTransport> {
  if (!p.identity) throw new Error(`the ${kind} transport serves TLS only; use the grpc-js transport for plaintext`);
  const server = await startHttp2Server({ ...p, identity: p.identity, handler: p.service, engine: kind === 'h2' ? 'h2' : 'node' });
  return { kind, port: server.port, stop: (graceMs) => server.stop(graceMs) };
}

async function startGrpcJs(p: TransportParts): Promise<CaTransport> {
  // Channelz bookkeeping costs CPU on every call and nothing reads it here.
  const server = new Server({
    'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
    'grpc.enable_channelz': 0,
    ...grpcJsLimitOptions(p.limits, (reason) => p.metrics.streamsRefused.inc({ reason })),
  });
  server.addService(caServiceDefinition(), p.service.implementation());
  p.health.addToServer(server);
  addReflection(server, [CA_PROTO, HEALTH_PROTO]);
  const creds = p.identity ? p.identity.credentials() : ServerCredentials.createInsecure();
  if (!p.identity) p.logger.warn('gRPC is PLAINTEXT: for loopback development only');
  const hostPart = p.host.includes(':') ? `[${p.host}]` : p.host;
  const port = await bindServer(server, `${hostPart}:${p.port}`, creds);
  return { kind: 'grpc-js', port, stop: (graceMs) => stopServer(server, graceMs) };
}
