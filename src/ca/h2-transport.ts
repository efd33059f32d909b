/**
 * The CA's default transport with TLS: the hot method,
 * `istio.v1.auth.IstioCertificateService/CreateCertificate`, is served directly on node:http2
 * (nghttp2 does the HTTP/2; no grpc-js on this path) for throughput, speaking the gRPC wire
 * protocol: HTTP/2 POST, 5-byte length-prefixed protobuf messages, `grpc-status`/`grpc-message`
 * trailers, `grpc-timeout` honoured. `grpc.health.v1.Health/Check` is answered here too. Every
 * other call (health Watch/List, reflection) is relayed stream-for-stream to a grpc-js server on
 * loopback (`fallbackPort`) when one is given, else answered UNIMPLEMENTED.
 *
 * The handler is the same `CertificateService` as on grpc-js; requests are decoded with protobufjs
 * from the same .proto files (keepCase, so the request has the same shape); the response
 * (`repeated string cert_chain`) is framed by hand in one buffer (`certChainFrame`). Bounds for
 * unauthenticated clients (limits.ts): here, in h2-limits.ts (connections) and h2-request.ts (bodies).
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
import type { Socket } from 'node:net';
import { status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { Logger } from '../core/log.js';
import type { HealthService } from '../grpc/health.js';
import { protobufRoot } from '../grpc/proto-load.js';
import type { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import { listenTcp } from '../ops/listen.js';
import { HEALTH_CHECK_PATH, HEALTH_CHECK_REQUEST_TYPE, HEALTH_CHECK_RESPONSE_TYPE, HEALTH_PROTO, SERVING_STATUS_NUMBER, type HealthCheckRequest } from '../protocol/grpc-health.js';
import { ERROR_CODE_METADATA } from '../protocol/grpc-status.js';
import { CA_PROTO, CERTIFICATE_REQUEST_TYPE, CREATE_CERTIFICATE_PATH, type IstioCertificateRequest } from '../protocol/istio-ca.js';
import { MALFORMED_REQUEST, type CallMetadata, type CertificateService } from './certificate-service.js';
import { limitConnections } from './h2-limits.js';
import { ACCEPT_ENCODING, readMessage, type ReadOptions, type WireError } from './h2-request.js';
import type { CaLimits } from './limits.js';
import type { CaMetrics } from './metrics.js';

// Shared by every call (frozen: node:http2 copies, never writes, header objects).
const OK_HEADERS = Object.freeze({ [h2.HTTP2_HEADER_STATUS]: 200, 'content-type': 'application/grpc' });
const OK_TRAILERS = Object.freeze({ 'grpc-status': '0' });

export interface H2TransportOptions {
  readonly host: string;
  readonly port: number;
  readonly identity: RotatingServerIdentity;
  readonly service: CertificateService;
  readonly health: HealthService;
  readonly logger: Logger;
  readonly maxMessageBytes: number;
  /** Connection, stream, header and time bounds (see limits.ts). */
  readonly limits: CaLimits;
  /** Counts closed connections and refused streams; reports open connections and streams. */
  readonly metrics?: CaMetrics;
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
  readonly healthRequest: protobuf.Type;
  readonly healthResponse: protobuf.Type;
}

function loadCodec(): Codec {
  const root = protobufRoot([CA_PROTO, HEALTH_PROTO]);
  return {
    request: root.lookupType(CERTIFICATE_REQUEST_TYPE),
    healthRequest: root.lookupType(HEALTH_CHECK_REQUEST_TYPE),
    healthResponse: root.lookupType(HEALTH_CHECK_RESPONSE_TYPE),
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

/** False once the call is over or answered (e.g. its deadline already answered it). */
function open(stream: ServerHttp2Stream): boolean {
  return !stream.destroyed && !stream.closed && !stream.headersSent;
}

function sendError(stream: ServerHttp2Stream, err: Partial<ServiceError>, extra?: Readonly<Record<string, string>>): void {
  if (!open(stream)) return;
  const headers: Record<string, string | number> = {
    [h2.HTTP2_HEADER_STATUS]: 200,
    'content-type': 'application/grpc',
    'grpc-status': err.code ?? GrpcStatus.INTERNAL,
    'grpc-message': grpcMessage(err.details ?? 'internal error'),
    ...extra,
  };
  const code = err.metadata?.get(ERROR_CODE_METADATA)[0];
  if (typeof code === 'string') headers[ERROR_CODE_METADATA] = code;
  // Trailers-only response.
  stream.respond(headers, { endStream: true });
  // A client still sending (a body too large, too slow, or never coming) is told to stop with
  // RST_STREAM(NO_ERROR) after the status (RFC 9113 §8.1), so the stream is gone here at once.
  if (!stream.readableEnded) stream.close(h2.NGHTTP2_NO_ERROR);
}

function sendWireError(stream: ServerHttp2Stream, err: WireError): void {
  sendError(stream, { code: err.grpcCode, details: err.message }, err.acceptEncoding ? { 'grpc-accept-encoding': ACCEPT_ENCODING } : undefined);
}

/** Answers with one message (an already framed body) and grpc-status 0. */
function sendFrame(stream: ServerHttp2Stream, framed: Buffer): void {
  if (!open(stream)) return;
  stream.respond(OK_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
  stream.end(framed);
}

const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The call's deadline from `grpc-timeout` (1–8 digits and a unit: H, M, S, m, u, n), in ms from
 * now; undefined when absent, malformed, or beyond what a timer can hold (then the client's own
 * deadline is the only one, as it always is in practice).
 */
export function grpcTimeoutMs(value: string | string[] | undefined): number | undefined {
  if (typeof value !== 'string') return undefined;
  const m = /^(\d{1,8})([HMSmun])$/u.exec(value);
  if (!m) return undefined;
  const ms = Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!;
  return ms <= MAX_TIMER_MS ? ms : undefined;
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

/** The call's headers as the handler reads them (no grpc-js `Metadata` per call). */
function metadataFrom(headers: IncomingHttpHeaders): CallMetadata {
  return {
    get(key) {
      const v = headers[key];
      if (v === undefined) return [];
      return typeof v === 'string' ? [v] : v;
    },
  };
}

/** Bytes of `n` as a protobuf varint. */
function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/**
 * IstioCertificateResponse (field 1, `repeated string cert_chain`) written straight into one
 * length-prefixed gRPC frame: one allocation, no intermediate message object. Tested against
 * protobufjs decoding of the same .proto.
 */
export function certChainFrame(chain: readonly string[]): Buffer {
  let size = 0;
  const lengths = new Array<number>(chain.length);
  for (let i = 0; i < chain.length; i++) {
    const n = Buffer.byteLength(chain[i]!, 'utf8');
    lengths[i] = n;
    size += 1 + varintSize(n) + n;
  }
  const out = Buffer.allocUnsafe(5 + size);
  out[0] = 0;
  out.writeUInt32BE(size, 1);
  let at = 5;
  for (let i = 0; i < chain.length; i++) {
    out[at++] = 0x0a; // field 1, length-delimited
    let n = lengths[i]!;
    while (n >= 0x80) {
      out[at++] = (n & 0x7f) | 0x80;
      n = Math.floor(n / 128);
    }
    out[at++] = n;
    at += out.write(chain[i]!, at, 'utf8');
  }
  return out;
}

interface CallContext {
  readonly codec: Codec;
  /** Body limits of the call (`maxBytes` is per method). */
  readonly read: Omit<ReadOptions, 'maxBytes'>;
}

function peerOf(stream: ServerHttp2Stream): string {
  return `${stream.session?.socket?.remoteAddress ?? '?'}:${stream.session?.socket?.remotePort ?? '?'}`;
}

function serveCreateCertificate(
  stream: ServerHttp2Stream,
  headers: IncomingHttpHeaders,
  c: CallContext & { readonly service: CertificateService; readonly maxMessageBytes: number },
): void {
  // As grpc-js does: at the client's deadline the call is answered DEADLINE_EXCEEDED; a result
  // that arrives later is dropped (`open` is false by then).
  const timeoutMs = grpcTimeoutMs(headers['grpc-timeout']);
  const deadline = timeoutMs === undefined ? undefined : setTimeout(() => sendError(stream, { code: GrpcStatus.DEADLINE_EXCEEDED, details: 'deadline exceeded' }), timeoutMs);
  readMessage(stream, { ...c.read, maxBytes: c.maxMessageBytes }, (err, bytes) => {
    if (err) {
      clearTimeout(deadline);
      return sendWireError(stream, err);
    }
    let request: IstioCertificateRequest;
    try {
      request = c.codec.request.toObject(c.codec.request.decode(bytes!), { longs: Number, defaults: true, oneofs: true }) as IstioCertificateRequest;
    } catch {
      // Not protobuf: the handler refuses it (INVALID_ARGUMENT, counted), before any authentication.
      request = MALFORMED_REQUEST;
    }
    c.service.createCertificate(request, metadataFrom(headers)).then(
      (res) => {
        clearTimeout(deadline);
        sendFrame(stream, certChainFrame(res.cert_chain));
      },
      (e: unknown) => {
        clearTimeout(deadline);
        sendError(stream, c.service.rejection(e, peerOf(stream)));
      },
    );
  });
}

function serveHealthCheck(stream: ServerHttp2Stream, c: CallContext & { readonly health: HealthService }): void {
  readMessage(stream, { ...c.read, maxBytes: 4096 }, (err, bytes) => {
    if (err) return sendWireError(stream, err);
    let req: HealthCheckRequest;
    try {
      req = c.codec.healthRequest.toObject(c.codec.healthRequest.decode(bytes!), { defaults: true }) as HealthCheckRequest;
    } catch {
      // The health service is a library's (grpc-js answers this INTERNAL too, as statuscodes.md
      // says for "error parsing request proto"); only the CA's own method says INVALID_ARGUMENT.
      return sendError(stream, { code: GrpcStatus.INTERNAL, details: 'bad request' });
    }
    const st = c.health.status(req.service);
    if (st === undefined) sendError(stream, { code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
    else sendFrame(stream, frame(c.codec.healthResponse.encode({ status: SERVING_STATUS_NUMBER[st] }).finish()));
  });
}

export async function startH2Transport(o: H2TransportOptions): Promise<H2Transport> {
  const codec = loadCodec();
  const limits = o.limits;
  const initial = o.identity.current();
  const server: Http2SecureServer = createSecureServer({
    ...(initial ? { cert: initial.certificate, key: initial.privateKey } : {}),
    allowHTTP1: false,
    // Time from the TCP connection to a finished TLS handshake (node's default is 120 s).
    handshakeTimeout: limits.tlsHandshakeTimeoutMs,
    // Headers over maxHeaderListSize never reach us: nghttp2 resets the stream with
    // ENHANCE_YOUR_CALM, which gRPC clients (grpc-js, grpc-go) report as RESOURCE_EXHAUSTED and
    // do not retry; clients that read the setting (grpc-go) fail locally before sending.
    settings: { maxConcurrentStreams: limits.maxConcurrentStreams, maxHeaderListSize: limits.maxHeaderListBytes },
  });
  // Counted and bounded before anything else sees a connection, a session or a stream.
  const counts = limitConnections(server, limits, o.metrics);
  // Without an identity (none yet, or the last one withdrawn at its notAfter) a connection is
  // dropped at once, as grpc-js does: no TLS is attempted with a missing or expired certificate.
  let presenting = initial !== null;
  server.prependListener('connection', (socket: Socket) => {
    if (!presenting) socket.destroy();
  });
  const unsubscribe = o.identity.onUpdate((id) => {
    presenting = id !== null;
    if (id) server.setSecureContext({ cert: id.certificate, key: id.privateKey });
  });
  const sessions = new Set<Http2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('error', () => undefined);
    s.once('close', () => sessions.delete(s));
  });
  server.on('sessionError', () => undefined);
  const bodyTimeouts = o.metrics?.streamsRefused.labels('body_timeout');
  const streamLimit = o.metrics?.streamsRefused.labels('stream_limit');
  const onBodyTimeout = () => bodyTimeouts?.inc();

  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    if (counts.streams() > limits.maxStreams) {
      streamLimit?.inc();
      stream.resume();
      sendError(stream, { code: GrpcStatus.RESOURCE_EXHAUSTED, details: 'too many open calls at the CA; retry later' });
      return;
    }
    const path = headers[h2.HTTP2_HEADER_PATH];
    if (headers[h2.HTTP2_HEADER_METHOD] !== 'POST' || !String(headers['content-type'] ?? '').startsWith('application/grpc')) {
      stream.respond({ [h2.HTTP2_HEADER_STATUS]: 415 }, { endStream: true });
      if (!stream.readableEnded) stream.close(h2.NGHTTP2_NO_ERROR);
      return;
    }
    const read: Omit<ReadOptions, 'maxBytes'> = { encoding: headers['grpc-encoding'], bodyTimeoutMs: limits.requestBodyTimeoutMs, onBodyTimeout };
    if (path === CREATE_CERTIFICATE_PATH) return serveCreateCertificate(stream, headers, { codec, service: o.service, read, maxMessageBytes: o.maxMessageBytes });
    if (path === HEALTH_CHECK_PATH) return serveHealthCheck(stream, { codec, health: o.health, read });
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
      // Whichever comes first settles the promise; the later resolve is a no-op.
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          for (const s of sessions) s.destroy();
          resolve('forced');
        }, Math.max(0, deadlineMs));
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve('graceful');
        });
        // GOAWAY: open streams finish, no new ones start.
        for (const s of sessions) s.close();
        upstreamSession?.close();
      });
    },
  };
}
