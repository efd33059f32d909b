/**
 * Reading the one request message of a unary gRPC call (a `ServerCall` of either HTTP/2
 * engine), bounded in size and in time, with the statuses the gRPC spec gives for every way the
 * bytes can be wrong. Used by the CA's TLS transports (h2-transport.ts).
 */
import { gunzipSync, inflateSync } from 'node:zlib';
import { status as GrpcStatus } from '@grpc/grpc-js';
import type { ServerCall } from './grpc-call.js';
import type { StreamRefusalReason } from './metrics.js';

/** Why `readMessage` answers a call itself (every refusal reason but the transport's stream cap). */
export type ReadRefusalReason = Exclude<StreamRefusalReason, 'stream_limit'>;

/** A gRPC status carried with a rejection from `readMessage`. */
export interface WireError {
  readonly grpcCode: number;
  readonly message: string;
  /** Answer with `grpc-accept-encoding` (an encoding we do not decompress was used). */
  readonly acceptEncoding?: boolean;
}

/** Request encodings decompressed here, as grpc-js does. */
export const ACCEPT_ENCODING = 'identity,deflate,gzip';

/** A method's bounds on its request (built once per method, not per call). */
export interface ReadOptions {
  readonly maxBytes: number;
  /** The whole request message must have arrived this long (ms) after the call's headers. */
  readonly bodyTimeoutMs: number;
  /** Counts a call answered here, before its handler. */
  readonly onRefused: (reason: ReadRefusalReason) => void;
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
 * Reads one request message from the stream (bounded in size and time; `encoding` is the call's
 * `grpc-encoding` header) and calls `done` exactly once: with the message, or with the status to
 * answer. Errors are plain objects, not
 * `Error`s: nothing here needs a stack, and capturing one per call is measurable.
 */
export function readMessage(call: ServerCall, r: ReadOptions, encoding: string | string[] | undefined, done: (err: WireError | undefined, message?: Buffer) => void): void {
  let first: Buffer | undefined;
  let more: Buffer[] | undefined;
  let size = 0;
  let settled = false;
  // A client that sends the headers and never the body holds a stream (and its session) open:
  // past the deadline the call is answered and closed.
  const bodyTimer = setTimeout(() => refuse('body_timeout', { grpcCode: GrpcStatus.DEADLINE_EXCEEDED, message: `request message not received within ${r.bodyTimeoutMs} ms` }), r.bodyTimeoutMs);
  const settle = (err: WireError | undefined, message?: Buffer) => {
    if (settled) return;
    settled = true;
    clearTimeout(bodyTimer);
    done(err, message);
  };
  /** Settles with `err`, counted by `reason` (only the first settlement counts). */
  const refuse = (reason: ReadRefusalReason, err: WireError) => {
    if (settled) return;
    r.onRefused(reason);
    settle(err);
  };
  call.readBody(
    (c) => {
      if (settled) return;
      size += c.length;
      if (size > r.maxBytes + 5) {
        refuse('unreadable', { grpcCode: GrpcStatus.RESOURCE_EXHAUSTED, message: 'message too large' });
        return;
      }
      // Copied when a second chunk comes: the first may be a view into a socket buffer.
      if (first === undefined) first = c;
      else (more ??= [Buffer.from(first)]).push(Buffer.from(c));
    },
    () => {
      const out = unframeRequest(more ? Buffer.concat(more) : first, encoding, r.maxBytes);
      if (Buffer.isBuffer(out)) settle(undefined, out);
      else refuse('unreadable', out);
    },
    // A client that resets the stream before the end: settle, so nothing waits forever.
    () => refuse('cancelled', { grpcCode: GrpcStatus.CANCELLED, message: 'stream closed early' }),
  );
}
