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
 * (`repeated string cert_chain`) is framed by hand in one buffer (`certChainFrame`).
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
import { gunzipSync, inflateSync } from 'node:zlib';
import { status as GrpcStatus, type ServiceError } from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import type { Logger } from '../core/log.js';
import type { HealthService } from '../grpc/health.js';
import { protobufRoot } from '../grpc/proto-load.js';
import type { RotatingServerIdentity } from '../grpc/rotating-credentials.js';
import { listenTcp } from '../ops/listen.js';
import {
  HEALTH_CHECK_PATH,
  HEALTH_CHECK_REQUEST_TYPE,
  HEALTH_CHECK_RESPONSE_TYPE,
  HEALTH_PROTO,
  SERVING_STATUS_NUMBER,
  type HealthCheckRequest,
} from '../protocol/grpc-health.js';
import { ERROR_CODE_METADATA } from '../protocol/grpc-status.js';
import { CA_PROTO, CERTIFICATE_REQUEST_TYPE, CREATE_CERTIFICATE_PATH, type IstioCertificateRequest } from '../protocol/istio-ca.js';
import { MALFORMED_REQUEST, type CallMetadata, type CertificateService } from './certificate-service.js';
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

/** A gRPC status carried with a rejection from `readMessage`. */
interface WireError {
  readonly grpcCode: number;
  readonly message: string;
  /** Answer with `grpc-accept-encoding` (an encoding we do not decompress was used). */
  readonly acceptEncoding?: boolean;
}

/** Request encodings decompressed here, as grpc-js does. */
const ACCEPT_ENCODING = 'identity,deflate,gzip';

interface ReadOptions {
  readonly maxBytes: number;
  /** The call's `grpc-encoding` header. */
  readonly encoding: string | string[] | undefined;
  /** The whole request message must have arrived this long (ms) after the call's headers. */
  readonly bodyTimeoutMs: number;
  readonly onBodyTimeout: () => void;
}

/**
 * The one request message of a complete request body, or the status to answer. The statuses
 * follow the gRPC spec (PROTOCOL-HTTP2.md, compression.md, statuscodes.md) and grpc-go where the
 * spec says nothing:
 * - no message, or more than one: a request cardinality violation, UNIMPLEMENTED (statuscodes.md;
 *   grpc-js answers the same);
 * - a body that ends inside a message (a partial prefix, or fewer bytes than the prefix declares):
 *   the request bytes are malformed, INVALID_ARGUMENT;
 * - Compressed-Flag other than 0 and 1: a framing violation, INTERNAL (grpc-go: "received
 *   unexpected payload format");
 * - Compressed-Flag 1 without `grpc-encoding` or with `identity`: PROTOCOL-HTTP2 says the flag
 *   must be 0 when Message-Encoding is absent, so the frame is refused with INTERNAL, as grpc-go
 *   does ("compressed flag set with identity or empty encoding"). (grpc-js reads such a frame as
 *   uncompressed; the grpc-js transport inherits that.)
 * - an encoding other than gzip/deflate: UNIMPLEMENTED with `grpc-accept-encoding`
 *   (compression.md); gzip/deflate that does not inflate: INTERNAL ("could not decompress");
 *   inflating past `maxBytes`: RESOURCE_EXHAUSTED.
 * A message that is not valid protobuf is the handler's to judge (INVALID_ARGUMENT, see
 * `MALFORMED_REQUEST`).
 */
export function unframeRequest(body: Buffer | undefined, encoding: string | string[] | undefined, maxBytes: number): WireError | Buffer {
  if (body === undefined || body.length === 0) return { grpcCode: GrpcStatus.UNIMPLEMENTED, message: 'no request message (exactly one expected)' };
  if (body.length < 5) return { grpcCode: GrpcStatus.INVALID_ARGUMENT, message: 'request message truncated' };
  const length = body.readUInt32BE(1);
  if (body.length < 5 + length) return { grpcCode: GrpcStatus.INVALID_ARGUMENT, message: 'request message truncated' };
  if (body.length > 5 + length) return { grpcCode: GrpcStatus.UNIMPLEMENTED, message: 'more than one request message (exactly one expected)' };
  const flag = body[0];
  const payload = body.subarray(5);
  if (flag === 0) return payload;
  if (flag !== 1) return { grpcCode: GrpcStatus.INTERNAL, message: `unexpected compressed-flag ${flag}` };
  const enc = (typeof encoding === 'string' ? encoding : '').trim().toLowerCase();
  if (enc === '' || enc === 'identity') return { grpcCode: GrpcStatus.INTERNAL, message: 'compressed flag set without grpc-encoding' };
  if (enc !== 'gzip' && enc !== 'deflate') return { grpcCode: GrpcStatus.UNIMPLEMENTED, message: `grpc-encoding ${enc.slice(0, 32)} is not supported`, acceptEncoding: true };
  try {
    return enc === 'gzip' ? gunzipSync(payload, { maxOutputLength: maxBytes }) : inflateSync(payload, { maxOutputLength: maxBytes });
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE') return { grpcCode: GrpcStatus.RESOURCE_EXHAUSTED, message: 'message too large' };
    return { grpcCode: GrpcStatus.INTERNAL, message: `request message does not decompress (${enc})` };
  }
}

/**
 * Reads one request message from the stream (bounded in size and time) and calls `done`
 * exactly once: with the message, or with the status to answer. Errors are plain objects, not
 * `Error`s: nothing here needs a stack, and capturing one per call is measurable.
 */
function readMessage(stream: ServerHttp2Stream, r: ReadOptions, done: (err: WireError | undefined, message?: Buffer) => void): void {
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let size = 0;
  let settled = false;
  // A client that sends the headers and never the body holds a stream (and its session) open:
  // past the deadline the call is answered and closed.
  const bodyTimer = setTimeout(() => {
    if (settled) return;
    r.onBodyTimeout();
    settle({ grpcCode: GrpcStatus.DEADLINE_EXCEEDED, message: `request message not received within ${r.bodyTimeoutMs} ms` });
  }, r.bodyTimeoutMs);
  const settle = (err: WireError | undefined, message?: Buffer) => {
    if (settled) return;
    settled = true;
    clearTimeout(bodyTimer);
    done(err, message);
  };
  stream.on('data', (c: Buffer) => {
    if (settled) return;
    size += c.length;
    if (size > r.maxBytes + 5) {
      settle({ grpcCode: GrpcStatus.RESOURCE_EXHAUSTED, message: 'message too large' });
      stream.pause();
      return;
    }
    if (first === undefined) first = c;
    else (more ??= [first]).push(c);
  });
  stream.once('end', () => {
    const out = unframeRequest(more ? Buffer.concat(more) : first, r.encoding, r.maxBytes);
    if (Buffer.isBuffer(out)) settle(undefined, out);
    else settle(out);
  });
  // A client that resets the stream before the end: settle, so nothing waits forever.
  stream.once('close', () => settle({ grpcCode: GrpcStatus.CANCELLED, message: 'stream closed early' }));
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
  // Beyond the cap the kernel's accepted socket is closed before any JS object or TLS state
  // exists for it (net.Server 'drop').
  server.maxConnections = limits.maxConnections;
  const metrics = o.metrics;
  const closedOverLimit = metrics?.connectionsClosed.labels('limit');
  const closedHandshake = metrics?.connectionsClosed.labels('tls_handshake_timeout');
  const closedIdle = metrics?.connectionsClosed.labels('idle');
  const bodyTimeouts = metrics?.streamsRefused.labels('body_timeout');
  const streamLimit = metrics?.streamsRefused.labels('stream_limit');
  let openConnections = 0;
  let openStreams = 0;
  metrics?.observeTransport(() => ({ connections: openConnections, streams: openStreams }));
  server.on('drop', () => closedOverLimit?.inc());
  server.on('connection', (socket: Socket) => {
    openConnections++;
    socket.once('close', () => openConnections--);
  });

  const unsubscribe = o.identity.onUpdate((id) => server.setSecureContext({ cert: id.certificate, key: id.privateKey }));
  const sessions = new Set<Http2Session>();
  server.on('session', (s) => {
    sessions.add(s);
    s.on('error', () => undefined);
    // Idle = no open stream (pings and settings do not count), as gRPC's MAX_CONNECTION_IDLE:
    // a session that carries nothing for idleSessionTimeoutMs gets GOAWAY and is closed.
    let streams = 0;
    let idleTimer: NodeJS.Timeout | undefined;
    const armIdle = () => {
      idleTimer = setTimeout(() => {
        if (streams > 0 || s.closed || s.destroyed) return;
        closedIdle?.inc();
        s.close();
      }, limits.idleSessionTimeoutMs);
      idleTimer.unref();
    };
    armIdle();
    s.on('stream', (stream: ServerHttp2Stream) => {
      if (streams++ === 0) clearTimeout(idleTimer);
      stream.once('close', () => {
        if (--streams === 0 && !s.closed && !s.destroyed) armIdle();
      });
    });
    s.once('close', () => {
      clearTimeout(idleTimer);
      sessions.delete(s);
    });
  });
  server.on('tlsClientError', (err: NodeJS.ErrnoException) => {
    if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') closedHandshake?.inc();
  });
  server.on('sessionError', () => undefined);
  const onBodyTimeout = () => bodyTimeouts?.inc();

  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    openStreams++;
    stream.once('close', () => openStreams--);
    if (openStreams > limits.maxStreams) {
      streamLimit?.inc();
      stream.resume();
      sendError(stream, { code: GrpcStatus.RESOURCE_EXHAUSTED, details: 'too many open calls at the CA; retry later' });
      return;
    }
    const path = headers[h2.HTTP2_HEADER_PATH];
    const peer = () => `${stream.session?.socket?.remoteAddress ?? '?'}:${stream.session?.socket?.remotePort ?? '?'}`;
    if (headers[h2.HTTP2_HEADER_METHOD] !== 'POST' || !String(headers['content-type'] ?? '').startsWith('application/grpc')) {
      stream.respond({ [h2.HTTP2_HEADER_STATUS]: 415 }, { endStream: true });
      if (!stream.readableEnded) stream.close(h2.NGHTTP2_NO_ERROR);
      return;
    }
    const read = { encoding: headers['grpc-encoding'], bodyTimeoutMs: limits.requestBodyTimeoutMs, onBodyTimeout };
    if (path === CREATE_CERTIFICATE_PATH) {
      // As grpc-js does: at the client's deadline the call is answered DEADLINE_EXCEEDED; a result
      // that arrives later is dropped (`open` is false by then).
      const timeoutMs = grpcTimeoutMs(headers['grpc-timeout']);
      const deadline =
        timeoutMs === undefined ? undefined : setTimeout(() => sendError(stream, { code: GrpcStatus.DEADLINE_EXCEEDED, details: 'deadline exceeded' }), timeoutMs);
      readMessage(stream, { ...read, maxBytes: o.maxMessageBytes }, (err, bytes) => {
        if (err) {
          clearTimeout(deadline);
          return sendWireError(stream, err);
        }
        let request: IstioCertificateRequest;
        try {
          request = codec.request.toObject(codec.request.decode(bytes!), { longs: Number, defaults: true, oneofs: true }) as IstioCertificateRequest;
        } catch {
          // Not protobuf: the handler refuses it (INVALID_ARGUMENT, counted), before any authentication.
          request = MALFORMED_REQUEST;
        }
        o.service.createCertificate(request, metadataFrom(headers)).then(
          (res) => {
            clearTimeout(deadline);
            sendFrame(stream, certChainFrame(res.cert_chain));
          },
          (e: unknown) => {
            clearTimeout(deadline);
            sendError(stream, o.service.rejection(e, peer()));
          },
        );
      });
      return;
    }
    if (path === HEALTH_CHECK_PATH) {
      readMessage(stream, { ...read, maxBytes: 4096 }, (err, bytes) => {
        if (err) return sendWireError(stream, err);
        let req: HealthCheckRequest;
        try {
          req = codec.healthRequest.toObject(codec.healthRequest.decode(bytes!), { defaults: true }) as HealthCheckRequest;
        } catch {
          // The health service is a library's (grpc-js answers this INTERNAL too, as statuscodes.md
          // says for "error parsing request proto"); only the CA's own method says INVALID_ARGUMENT.
          return sendError(stream, { code: GrpcStatus.INTERNAL, details: 'bad request' });
        }
        const st = o.health.status(req.service);
        if (st === undefined) sendError(stream, { code: GrpcStatus.NOT_FOUND, details: 'unknown service' });
        else sendFrame(stream, frame(codec.healthResponse.encode({ status: SERVING_STATUS_NUMBER[st] }).finish()));
      });
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
