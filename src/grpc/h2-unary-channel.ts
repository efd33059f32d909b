/**
 * A lean gRPC client for unary calls over TLS on node:http2 (nghttp2 does the HTTP/2; no grpc-js
 * on the call path): one kept session to one server, re-opened on the next call after the server
 * sent GOAWAY, the session closed or failed, or a call on it hit its deadline (a connection that
 * died silently looks like that); the TLS certificate verified against the given roots for the
 * given name; a deadline per call (`grpc-timeout` sent, and enforced here); cancellation through
 * an AbortSignal (RST_STREAM CANCEL). A call resolves with the gRPC status and the one response
 * message; transport failures are statuses too (UNAVAILABLE, DEADLINE_EXCEEDED, ...), as grpc-js
 * reports them. The caller encodes and decodes the messages; with `early` it decodes (and checks)
 * the response message as soon as its last byte is in, while the status trailers — a separate
 * write one event-loop turn later from a node:http2 server — are still on the way.
 *
 * Given several addresses (a list, grpc/ca-target.ts), one session is kept at a time and each new
 * session goes to the next address in turn, so when a replica's session fails the next call opens
 * one to another replica (failover; the calls of one kept session do not spread). A DNS name is
 * looked up by node:net at each new session.
 */
import { connect, constants as h2, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { isIP } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { parseCaTarget, type CaEndpoint } from './ca-target.js';
import { parseRetryPushbackMs, RETRY_PUSHBACK_METADATA } from './retry-pushback.js';
import { frame, grpcTimeoutHeader, parseGrpcMessage } from './wire-format.js';

export interface H2UnaryChannelOptions {
  /** `host:port`, `[v6]:port` (a `dns:///` prefix is accepted, as grpc-js does), or a list of IP addresses (ca-target.ts). */
  readonly address: string;
  /** PEM roots the server's certificate must chain to. */
  readonly rootsPem: string;
  /** The name verified in the server's certificate (and sent as SNI and :authority), when not the address host. */
  readonly serverName?: string;
  /** A TLS handshake that takes longer is abandoned (its calls: UNAVAILABLE). */
  readonly handshakeTimeoutMs: number;
  /** Largest response message accepted (default 4 MiB, as grpc-js). */
  readonly maxResponseBytes?: number;
}

export interface UnaryCallOptions<T = never> {
  readonly path: string;
  /** Call metadata (lower-case keys; no pseudo-headers). */
  readonly metadata: Readonly<Record<string, string>>;
  /** The request message, encoded. */
  readonly message: Uint8Array;
  readonly timeoutMs: number;
  readonly signal: AbortSignal;
  /**
   * Reads the response message as soon as it is complete (its length prefix says so), while the
   * status (the trailers, which node:http2 servers send in a later write) is still on the way:
   * decoding and checking the answer overlap that wait. Its outcome is returned with an OK status
   * only (`early`); a call that ends otherwise returns its status and the outcome is dropped.
   */
  readonly early?: (message: Buffer) => T;
}

/** What `early` returned for the response message, or what it threw. */
export type EarlyRead<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

/** How a call ended: `code` 0 with the response message, or another gRPC status and its message. */
export interface UnaryResult<T = never> {
  readonly code: GrpcStatus;
  readonly details: string;
  readonly message?: Buffer;
  /** A refusal's retry pushback (gRFC A6: `grpc-retry-pushback-ms`), when the server sent one. */
  readonly retryAfterMs?: number;
  /** With `early` and `code` 0: its outcome for `message`. */
  readonly early?: EarlyRead<T>;
}

/**
 * The result of a call whose status is OK: its one uncompressed message (with the early read's
 * outcome, made now when the message was not read before the status), else INTERNAL.
 */
function okResult<T>(body: Buffer | undefined, early: EarlyReader<T> | undefined): UnaryResult<T> {
  if (body === undefined || body.length < 5 || body.readUInt32BE(1) !== body.length - 5) return { code: GrpcStatus.INTERNAL, details: 'response is not exactly one gRPC message' };
  if (body[0] !== 0) return { code: GrpcStatus.INTERNAL, details: 'response message is compressed (none was accepted)' };
  const message = body.subarray(5);
  return early ? { code: GrpcStatus.OK, details: '', message, early: early.outcome ?? readEarly(early.read, message) } : { code: GrpcStatus.OK, details: '', message };
}

/** Reads a call's response message as soon as it is complete, before the status (`early`). */
class EarlyReader<T> {
  readonly read: (message: Buffer) => T;
  /** The message's length from its prefix, once 5 bytes are in. */
  #declared: number | undefined;
  outcome: EarlyRead<T> | undefined;

  constructor(read: (message: Buffer) => T) {
    this.read = read;
  }

  /** After each chunk: the chunks so far (`first`, or all of them in `more`), `size` bytes in all. */
  received(first: Buffer, more: Buffer[] | undefined, size: number): void {
    if (this.outcome !== undefined || size < 5) return;
    this.#declared ??= (first.length >= 5 ? first : Buffer.concat(more!)).readUInt32BE(1);
    if (size !== this.#declared + 5) return;
    const body = more ? Buffer.concat(more) : first;
    // Compressed is refused at the end; a byte more makes it not one message, refused there too.
    if (body[0] === 0) this.outcome = readEarly(this.read, body.subarray(5));
  }
}

/** `read`'s outcome for `message`, never throwing. */
function readEarly<T>(read: (message: Buffer) => T, message: Buffer): EarlyRead<T> {
  try {
    return { ok: true, value: read(message) };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The gRPC status for an HTTP status other than 200 (http-grpc-status-mapping.md). */
function statusOfHttp(status: number): GrpcStatus {
  switch (status) {
    case 400:
      return GrpcStatus.INTERNAL;
    case 401:
      return GrpcStatus.UNAUTHENTICATED;
    case 403:
      return GrpcStatus.PERMISSION_DENIED;
    case 404:
      return GrpcStatus.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504:
      return GrpcStatus.UNAVAILABLE;
    default:
      return GrpcStatus.UNKNOWN;
  }
}

/** The gRPC status for a stream reset without a status (as grpc-js maps RST_STREAM codes). */
function statusOfReset(rstCode: number): GrpcStatus {
  if (rstCode === h2.NGHTTP2_REFUSED_STREAM) return GrpcStatus.UNAVAILABLE;
  if (rstCode === h2.NGHTTP2_CANCEL) return GrpcStatus.CANCELLED;
  if (rstCode === h2.NGHTTP2_ENHANCE_YOUR_CALM) return GrpcStatus.RESOURCE_EXHAUSTED;
  if (rstCode === h2.NGHTTP2_INADEQUATE_SECURITY) return GrpcStatus.PERMISSION_DENIED;
  return GrpcStatus.INTERNAL;
}

const DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

export class H2UnaryChannel {
  readonly #o: H2UnaryChannelOptions;
  /** Where sessions go, in turn (empty when the address is not one). */
  readonly #endpoints: readonly CaEndpoint[];
  /** The endpoint of the next new session. */
  #next = 0;
  /** Each session's :authority. */
  readonly #authorities = new WeakMap<ClientHttp2Session, string>();
  #session: ClientHttp2Session | undefined;
  #closed = false;
  #rootsPem: string;
  /** Why a session failed (TLS verification, refused connection), for the calls it ends. */
  readonly #failures = new WeakMap<ClientHttp2Session, Error>();
  /** Sessions that emitted 'close'. */
  readonly #ended = new WeakSet<ClientHttp2Session>();

  constructor(options: H2UnaryChannelOptions) {
    this.#o = options;
    this.#rootsPem = options.rootsPem;
    const parsed = parseCaTarget(options.address);
    this.#endpoints = 'problem' in parsed ? [] : parsed.endpoints;
  }

  /** One unary call; never rejects but with `signal`'s reason once it aborted. */
  call<T = never>(c: UnaryCallOptions<T>): Promise<UnaryResult<T>> {
    if (c.signal.aborted) return Promise.reject(c.signal.reason);
    if (this.#closed) return Promise.resolve({ code: GrpcStatus.UNAVAILABLE, details: 'channel closed' });
    if (this.#endpoints.length === 0) return Promise.resolve({ code: GrpcStatus.UNAVAILABLE, details: `address ${JSON.stringify(this.#o.address)} is not host:port` });
    let session: ClientHttp2Session;
    let stream: ClientHttp2Stream;
    try {
      session = this.#current();
      const headers: OutgoingHttpHeaders = {
        ...c.metadata,
        [h2.HTTP2_HEADER_METHOD]: 'POST',
        [h2.HTTP2_HEADER_PATH]: c.path,
        [h2.HTTP2_HEADER_AUTHORITY]: this.#authorities.get(session)!,
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': grpcTimeoutHeader(c.timeoutMs),
      };
      stream = session.request(headers, { endStream: false });
    } catch (err) {
      // The session was closing or out of stream ids: the next call opens another one.
      this.#drop(this.#session);
      return Promise.resolve({ code: GrpcStatus.UNAVAILABLE, details: `cannot start a call: ${(err as Error).message}` });
    }
    return new Promise<UnaryResult<T>>((resolve, reject) => {
      const maxBytes = this.#o.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
      let settled = false;
      let status: GrpcStatus | undefined;
      let details = '';
      let pushback: number | undefined;
      let httpStatus = 0;
      let first: Buffer | undefined;
      let more: Buffer[] | undefined;
      let size = 0;
      const early = c.early ? new EarlyReader(c.early) : undefined;
      const finish = (r: UnaryResult<T> | { readonly aborted: unknown }) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        c.signal.removeEventListener('abort', onAbort);
        if (!stream.closed) stream.close(h2.NGHTTP2_CANCEL);
        if ('aborted' in r) reject(r.aborted);
        else resolve(r);
      };
      const onAbort = () => finish({ aborted: c.signal.reason });
      c.signal.addEventListener('abort', onAbort, { once: true });
      const deadline = setTimeout(() => {
        // A silently dead connection looks like this too: later calls get a new one.
        this.#retire(session);
        finish({ code: GrpcStatus.DEADLINE_EXCEEDED, details: 'deadline exceeded' });
      }, c.timeoutMs);
      const readStatus = (h: IncomingHttpHeaders) => {
        const raw = h['grpc-status'];
        if (raw === undefined) return;
        const n = Number(raw);
        status = Number.isInteger(n) && n >= 0 && n <= 16 ? n : GrpcStatus.UNKNOWN;
        details = parseGrpcMessage(h['grpc-message']);
        pushback = parseRetryPushbackMs(h[RETRY_PUSHBACK_METADATA]);
      };
      stream.on('response', (h) => {
        httpStatus = Number(h[h2.HTTP2_HEADER_STATUS]);
        readStatus(h);
      });
      stream.on('trailers', readStatus);
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes + 5) {
          finish({ code: GrpcStatus.RESOURCE_EXHAUSTED, details: `response message larger than ${maxBytes} bytes` });
          return;
        }
        if (first === undefined) first = chunk;
        else (more ??= [first]).push(chunk);
        // The one message is complete: read it now (a byte more is refused at the end anyway).
        early?.received(first, more, size);
      });
      stream.on('error', () => undefined); // the outcome is read on 'close'
      stream.once('close', () => {
        if (settled) return;
        if (httpStatus !== 200 && httpStatus !== 0) return finish({ code: statusOfHttp(httpStatus), details: `HTTP status ${httpStatus}` });
        if (status === undefined) {
          if (session.destroyed) {
            // The connection failed or went away (TLS refused, handshake abandoned, reset):
            // UNAVAILABLE, with the session's error, which node emits after its streams closed.
            const unavailable = () => {
              const failure = this.#failures.get(session);
              finish({ code: GrpcStatus.UNAVAILABLE, details: failure ? `connection failed: ${failure.message}` : 'connection closed' });
            };
            if (this.#ended.has(session)) unavailable();
            else session.once('close', unavailable);
            return;
          }
          const code = stream.rstCode;
          if (code !== undefined && code !== h2.NGHTTP2_NO_ERROR) return finish({ code: statusOfReset(code), details: `stream reset (code ${code})` });
          return finish({ code: GrpcStatus.UNAVAILABLE, details: 'call ended without a status' });
        }
        if (status !== GrpcStatus.OK) return finish({ code: status, details, ...(pushback === undefined ? {} : { retryAfterMs: pushback }) });
        finish(okResult(more ? Buffer.concat(more) : first, early));
      });
      stream.end(frame(c.message));
    });
  }

  /**
   * Verifies the server against `rootsPem` from the next session on (a CA root rotation); the
   * kept session is retired gracefully (its calls finish on it).
   */
  trustRoots(rootsPem: string): void {
    if (rootsPem === this.#rootsPem) return;
    this.#rootsPem = rootsPem;
    if (this.#session) this.#retire(this.#session);
  }

  /** Closes the session (calls in progress end UNAVAILABLE) and refuses new calls. */
  close(): void {
    this.#closed = true;
    this.#session?.destroy();
    this.#session = undefined;
  }

  /** The kept session, or a new one when there is none usable. */
  #current(): ClientHttp2Session {
    const s = this.#session;
    if (s && !s.closed && !s.destroyed) return s;
    const { host, port } = this.#endpoints[this.#next++ % this.#endpoints.length]!;
    const hostPart = isIP(host) === 6 ? `[${host}]` : host;
    const tlsOptions = {
      host,
      port,
      ca: this.#rootsPem,
      ALPNProtocols: ['h2'],
      // SNI and the verified name: the server name, else the host (SNI is not sent for an IP).
      ...(this.#o.serverName ? { servername: this.#o.serverName } : isIP(host) ? {} : { servername: host }),
    };
    const session = connect(`https://${hostPart}:${port}`, {
      createConnection: () => {
        const socket = tlsConnect(tlsOptions);
        // A call is a few small frames each way: no Nagle delay between them (grpc-js does the same).
        socket.setNoDelay(true);
        return socket;
      },
    });
    const handshake = setTimeout(() => session.destroy(new Error(`TLS handshake did not complete within ${this.#o.handshakeTimeoutMs} ms`)), this.#o.handshakeTimeoutMs);
    session.once('connect', () => clearTimeout(handshake));
    session.once('close', () => {
      this.#ended.add(session);
      clearTimeout(handshake);
      this.#drop(session);
    });
    // New calls go to a new session; calls the server accepted finish on this one.
    session.once('goaway', () => this.#drop(session));
    session.on('error', (err) => {
      this.#failures.set(session, err);
      this.#drop(session);
    });
    this.#authorities.set(session, this.#o.serverName ? `${this.#o.serverName}:${port}` : `${hostPart}:${port}`);
    // The session does not keep the process alive between calls.
    session.unref();
    this.#session = session;
    return session;
  }

  /** Forgets `session` (its open calls carry on). */
  #drop(session: ClientHttp2Session | undefined): void {
    if (session !== undefined && this.#session === session) this.#session = undefined;
  }

  /** Forgets `session` and closes it gracefully (GOAWAY: its other calls finish). */
  #retire(session: ClientHttp2Session): void {
    this.#drop(session);
    if (!session.closed && !session.destroyed) session.close();
  }
}
