/**
 * A lean transport for the CA: the hot method,
 * `istio.v1.auth.IstioCertificateService/CreateCertificate`, is served directly on node:http2
 * over TLS (no grpc-js) for throughput, speaking the gRPC wire protocol (HTTP/2 POST, 5-byte
 * length-prefixed protobuf messages, `grpc-status`/`grpc-message` trailers).
 * `grpc.health.v1.Health/Check` is answered here too. Every other call (health Watch/List,
 * reflection) is relayed stream-for-stream to a grpc-js server on loopback (`fallbackPort`)
 * when one is given, else answered UNIMPLEMENTED.
 *
 * The handler is the same `CertificateService` as on grpc-js; messages are decoded/encoded with
 * protobufjs from the same .proto files (keepCase, so the request has the same shape).
 */
import {
  connect,
  createSecureServer,
  constants as h2,
  type ClientHttp2Session,
  type Http2SecureServer,
  type Http2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import { Metadata, status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { Logger } from '../core/log.js';
import type { HealthService } from '../grpc/health.js';
import { protobufRoot } from '../grpc/proto-load.js';
import type { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import { listenTcp } from '../ops/listen.js';
import type { CertificateService, IstioCertificateRequest } from './certificate-service.js';

const CREATE_PATH = '/istio.v1.auth.IstioCertificateService/CreateCertificate';
const HEALTH_CHECK_PATH = '/grpc.health.v1.Health/Check';
const HEALTH_STATUS: Record<string, number> = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 };

export interface H2TransportOptions {
  readonly host: string;
  readonly port: number;
  readonly identity: RotatingServerIdentity;
  readonly service: CertificateService;
  readonly health: HealthService;
  readonly logger: Logger;
  readonly maxMessageBytes: number;
  /** A plaintext grpc-js server on 127.0.0.1 for every other method (health Watch, reflection). */
  readonly fallbackPort?: number;
}

export interface H2Transport {
  readonly port: number;
  /** Stops accepting, lets open calls finish (GOAWAY), destroys what is left at the deadline. */
  close(deadlineMs: number): Promise<'graceful' | 'forced'>;
}

interface Codec {
  readonly request: protobuf.Type;
  readonly response: protobuf.Type;
  readonly healthRequest: protobuf.Type;
  readonly healthResponse: protobuf.Type;
}

function loadCodec(): Codec {
  const root = protobufRoot(['istio/v1/auth/ca.proto', 'grpc/health/v1/health.proto'], { keepCase: true });
  return {
    request: root.lookupType('istio.v1.auth.IstioCertificateRequest'),
    response: root.lookupType('istio.v1.auth.IstioCertificateResponse'),
    healthRequest: root.lookupType('grpc.health.v1.HealthCheckRequest'),
    healthResponse: root.lookupType('grpc.health.v1.HealthCheckResponse'),
  };
}

function frame(body: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(5 + body.length);
  out[0] = 0;
  out.writeUInt32BE(body.length, 1);
  out.set(body, 5);
  return out;
}

function grpcMessage(details: string): string {
  // Percent-encode as the gRPC spec asks (printable ASCII except '%' stays).
  return details.replace(/[^\x20-\x24\x26-\x7e]/gu, (c) => encodeURIComponent(c));
}

function sendError(stream: ServerHttp2Stream, err: Partial<ServiceError>): void {
  if (stream.destroyed || stream.closed) return;
  const headers: Record<string, string | number> = {
    [h2.HTTP2_HEADER_STATUS]: 200,
    'content-type': 'application/grpc',
    'grpc-status': err.code ?? GrpcStatus.INTERNAL,
    'grpc-message': grpcMessage(err.details ?? 'internal error'),
  };
  const code = err.metadata?.get('certbroker-error-code')[0];
  if (typeof code === 'string') headers['certbroker-error-code'] = code;
  // Trailers-only response.
  stream.respond(headers, { endStream: true });
}

function sendMessage(stream: ServerHttp2Stream, body: Uint8Array): void {
  if (stream.destroyed || stream.closed) return;
  stream.respond({ [h2.HTTP2_HEADER_STATUS]: 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
  stream.end(frame(body));
}

/** Reads one length-prefixed, uncompressed message from the stream (bounded). */
function readMessage(stream: ServerHttp2Stream, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes + 5) {
        reject(Object.assign(new Error('message too large'), { grpcCode: GrpcStatus.RESOURCE_EXHAUSTED }));
        stream.pause();
        return;
      }
      chunks.push(c);
    });
    stream.once('end', () => {
      const buf = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (buf.length < 5) return reject(Object.assign(new Error('missing message'), { grpcCode: GrpcStatus.INTERNAL }));
      if (buf[0] !== 0) return reject(Object.assign(new Error('compressed messages are not supported'), { grpcCode: GrpcStatus.UNIMPLEMENTED }));
      const len = buf.readUInt32BE(1);
      if (len !== buf.length - 5) return reject(Object.assign(new Error('one message expected'), { grpcCode: GrpcStatus.INTERNAL }));
      resolve(buf.subarray(5));
    });
    stream.once('error', reject);
    // A client that resets the stream before the end: settle, so nothing waits forever.
    stream.once('close', () => reject(Object.assign(new Error('stream closed early'), { grpcCode: GrpcStatus.CANCELLED })));
  });
}

/** Headers of one side minus the pseudo-headers and hop-by-hop ones. */
function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || k.startsWith(':') || k === 'connection' || k === 'host') continue;
    out[k] = v;
  }
  return out;
}

/**
 * Relays one gRPC call (any kind: unary, server/client/bidi streaming) to the loopback grpc-js
 * server: request headers and messages up, response headers, messages and trailers down;
 * cancellation either way resets the other side.
 */
function relay(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, session: ClientHttp2Session): void {
  const up = session.request({
    ...endToEnd(headers),
    [h2.HTTP2_HEADER_METHOD]: 'POST',
    [h2.HTTP2_HEADER_PATH]: String(headers[h2.HTTP2_HEADER_PATH]),
  });
  let trailers: Record<string, string | string[]> | undefined;
  up.on('response', (h) => {
    if (stream.destroyed || stream.closed) return;
    const hs = { ...endToEnd(h), [h2.HTTP2_HEADER_STATUS]: h[h2.HTTP2_HEADER_STATUS] ?? 200 };
    if (h['grpc-status'] !== undefined) {
      // Trailers-only response.
      stream.respond(hs, { endStream: true });
      up.resume();
      return;
    }
    stream.respond(hs, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(trailers ?? { 'grpc-status': String(GrpcStatus.INTERNAL), 'grpc-message': 'upstream ended without status' }));
    up.pipe(stream);
  });
  up.on('trailers', (t) => {
    trailers = endToEnd(t);
  });
  up.on('error', () => sendError(stream, { code: GrpcStatus.UNAVAILABLE, details: 'service unavailable' }));
  stream.pipe(up);
  stream.on('close', () => {
    if (!up.closed) up.close(h2.NGHTTP2_CANCEL);
  });
  up.on('close', () => {
    if (!stream.closed && up.rstCode !== undefined && up.rstCode !== h2.NGHTTP2_NO_ERROR) stream.close(h2.NGHTTP2_CANCEL);
  });
}

function metadataFrom(headers: IncomingHttpHeaders): Metadata {
  const md = new Metadata();
  const auth = headers.authorization;
  if (typeof auth === 'string') md.set('authorization', auth);
  const cluster = headers.clusterid;
  if (typeof cluster === 'string') md.set('clusterid', cluster);
  return md;
}

export async function startH2Transport(o: H2TransportOptions): Promise<H2Transport> {
  const codec = loadCodec();
  const initial = o.identity.current();
  const server: Http2SecureServer = createSecureServer({
    ...(initial ? { cert: initial.certificate, key: initial.privateKey } : {}),
    allowHTTP1: false,
    settings: { maxConcurrentStreams: 1000 },
  });
  const unsubscribe = o.identity.onUpdate((id) => server.setSecureContext({ cert: id.certificate, key: id.privateKey }));
  const sessions = new Set<Http2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
    s.on('error', () => undefined);
  });
  server.on('tlsClientError', () => undefined);
  server.on('sessionError', () => undefined);

  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    const path = headers[h2.HTTP2_HEADER_PATH];
    const peer = `${stream.session?.socket?.remoteAddress ?? '?'}:${stream.session?.socket?.remotePort ?? '?'}`;
    if (headers[h2.HTTP2_HEADER_METHOD] !== 'POST' || !String(headers['content-type'] ?? '').startsWith('application/grpc')) {
      stream.respond({ [h2.HTTP2_HEADER_STATUS]: 415 }, { endStream: true });
      return;
    }
    if (path === CREATE_PATH) {
      readMessage(stream, o.maxMessageBytes)
        .then(async (bytes) => {
          let request: IstioCertificateRequest;
          try {
            request = codec.request.toObject(codec.request.decode(bytes), { longs: Number, defaults: true, oneofs: true }) as IstioCertificateRequest;
          } catch {
            sendError(stream, { code: GrpcStatus.INTERNAL, details: 'request cannot be parsed' });
            return;
          }
          try {
            const res = await o.service.createCertificate(request, metadataFrom(headers));
            sendMessage(stream, codec.response.encode(codec.response.fromObject(res)).finish());
          } catch (err) {
            sendError(stream, o.service.rejection(err, peer));
          }
        })
        .catch((err: { grpcCode?: number; message?: string }) => sendError(stream, { code: err.grpcCode ?? GrpcStatus.INTERNAL, details: err.message ?? 'internal error' }));
      return;
    }
    if (path === HEALTH_CHECK_PATH) {
      readMessage(stream, 4096)
        .then((bytes) => {
          const req = codec.healthRequest.toObject(codec.healthRequest.decode(bytes), { defaults: true }) as { service: string };
          const st = o.health.status(req.service);
          if (st === undefined) sendError(stream, { code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
          else sendMessage(stream, codec.healthResponse.encode({ status: HEALTH_STATUS[st] ?? 0 }).finish());
        })
        .catch(() => sendError(stream, { code: GrpcStatus.INTERNAL, details: 'bad request' }));
      return;
    }
    if (o.fallbackPort !== undefined) {
      try {
        relay(stream, headers, upstream());
      } catch {
        // The loopback session was closing (shutdown): answer instead of throwing.
        sendError(stream, { code: GrpcStatus.UNAVAILABLE, details: 'service unavailable' });
      }
      return;
    }
    stream.resume();
    sendError(stream, { code: GrpcStatus.UNIMPLEMENTED, details: `method ${String(path)} is not served by this transport` });
  });

  // One shared HTTP/2 session to the loopback grpc-js server, re-opened when it goes away.
  let upstreamSession: ClientHttp2Session | undefined;
  const upstream = (): ClientHttp2Session => {
    if (upstreamSession && !upstreamSession.closed && !upstreamSession.destroyed) return upstreamSession;
    const s = connect(`http://127.0.0.1:${o.fallbackPort}`);
    s.on('error', () => undefined);
    s.on('close', () => {
      if (upstreamSession === s) upstreamSession = undefined;
    });
    upstreamSession = s;
    return s;
  };

  const port = await listenTcp(server, o.port, o.host);

  return {
    port,
    close(deadlineMs) {
      unsubscribe();
      return new Promise((resolve) => {
        let done = false;
        const finish = (how: 'graceful' | 'forced') => {
          if (done) return;
          done = true;
          resolve(how);
        };
        const timer = setTimeout(() => {
          for (const s of sessions) s.destroy();
          finish('forced');
        }, Math.max(0, deadlineMs));
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          finish('graceful');
        });
        // GOAWAY: open streams finish, no new ones start.
        for (const s of sessions) s.close();
        upstreamSession?.close();
      });
    },
  };
}
