/**
 * A raw gRPC-over-HTTP/2 client for the CA tests that need what no gRPC library sends: wrong
 * content types, broken frames, resets mid-body, a deadline only the server enforces.
 *
 *   const raw = rawCaSession(ca);
 *   const { http, grpc } = await raw.call({ authorization: `Bearer ${t}` }, requestFrame(req));
 *   raw.close();
 */
import { connect, constants, type ClientHttp2Session, type SecureClientSessionOptions } from 'node:http2';
import type { CaServer } from '../../../src/ca/index.js';
import { protobufRoot } from '../../../src/grpc/index.js';

export const CREATE_CERTIFICATE_PATH = '/istio.v1.auth.IstioCertificateService/CreateCertificate';

export interface RawResult {
  /** HTTP status of the response headers. */
  readonly http?: number;
  /** grpc-status, from the trailers or a trailers-only response. */
  readonly grpc?: number;
  /** Response headers and trailers (string values), merged. */
  readonly metadata: Readonly<Record<string, string>>;
  /** The stream's RST_STREAM code as node reports it (0 = NO_ERROR). */
  readonly rstCode?: number;
  /** The response's DATA bytes (its gRPC frames), concatenated. */
  readonly body: Buffer;
  /** The call's `deadlineMs` passed and this client cancelled the stream. */
  readonly deadlineExceeded?: boolean;
}

export interface RawCaSession {
  /**
   * One CreateCertificate call: POST, application/grpc, te: trailers unless `headers` says
   * otherwise. `resetAfterMs`: send 5 bytes of a frame, then reset the stream after that long.
   * `open`: send the headers (and `body`, if any) but never end the request side.
   * `deadlineMs`: a client's own deadline: cancel the stream (NGHTTP2_CANCEL) after that long.
   */
  call(headers: Record<string, string>, body: Buffer | undefined, options?: { readonly resetAfterMs?: number; readonly open?: boolean; readonly deadlineMs?: number }): Promise<RawResult>;
  /** The underlying HTTP/2 session (its settings, its close). */
  readonly session: ClientHttp2Session;
  close(): void;
}

/** A raw session to `ca`, or to any CA port trusting `rootsPem`. */
export function rawCaSession(ca: CaServer | { readonly port: number; rootsPem(): string }, options: SecureClientSessionOptions = {}): RawCaSession {
  const session: ClientHttp2Session = connect(`https://localhost:${ca.port}`, { ca: ca.rootsPem(), host: '127.0.0.1', ...options } as never);
  session.on('error', () => undefined);
  return {
    session,
    call(headers, body, options = {}) {
      return new Promise((resolve) => {
        const req = session.request({ ':method': 'POST', ':path': CREATE_CERTIFICATE_PATH, 'content-type': 'application/grpc', te: 'trailers', ...headers });
        const out: { http?: number; grpc?: number; metadata: Record<string, string>; rstCode?: number; deadlineExceeded?: boolean } = { metadata: {} };
        const deadline =
          options.deadlineMs === undefined
            ? undefined
            : setTimeout(() => {
                out.deadlineExceeded = true;
                req.close(constants.NGHTTP2_CANCEL);
              }, options.deadlineMs);
        const keep = (h: Record<string, unknown>) => {
          for (const [k, v] of Object.entries(h)) if (typeof v === 'string') out.metadata[k] = v;
        };
        req.on('response', (h) => {
          out.http = Number(h[':status']);
          keep(h);
          if (h['grpc-status'] !== undefined) out.grpc = Number(h['grpc-status']);
        });
        req.on('trailers', (t) => {
          keep(t);
          out.grpc = Number(t['grpc-status']);
        });
        const chunks: Buffer[] = [];
        req.on('data', (d: Buffer) => chunks.push(d));
        req.on('error', () => undefined);
        req.on('close', () => {
          clearTimeout(deadline);
          resolve({ ...out, rstCode: req.rstCode, body: Buffer.concat(chunks) });
        });
        if (options.resetAfterMs !== undefined) {
          req.write(Buffer.from([0, 0, 0, 1, 0]));
          setTimeout(() => req.close(constants.NGHTTP2_CANCEL), options.resetAfterMs);
        } else if (options.open) {
          if (body) req.write(body);
        } else req.end(body);
      });
    },
    close: () => session.close(),
  };
}

const Req = protobufRoot(['istio/v1/auth/ca.proto']).lookupType('istio.v1.auth.IstioCertificateRequest');

/** An IstioCertificateRequest (protobufjs object form, .proto field names: `validity_duration`) encoded and framed. */
export function requestFrame(request: Record<string, unknown>, o: { readonly flag?: number; readonly declaredLength?: number } = {}): Buffer {
  return frameBytes(Req.encode(Req.fromObject(request)).finish(), o);
}

/** `body` behind a gRPC message prefix (compressed-flag byte, 4-byte length; both overridable). */
export function frameBytes(body: Uint8Array, o: { readonly flag?: number; readonly declaredLength?: number } = {}): Buffer {
  const f = Buffer.alloc(5 + body.length);
  f[0] = o.flag ?? 0;
  f.writeUInt32BE((o.declaredLength ?? body.length) >>> 0, 1);
  f.set(body, 5);
  return f;
}

/** The encoded request without the frame (for tests that mangle the protobuf itself). */
export function requestBytes(request: Record<string, unknown>): Uint8Array {
  return Req.encode(Req.fromObject(request)).finish();
}
