/**
 * Writing a gRPC answer on a node:http2 server stream (the CA's http2 transport): one message
 * with grpc-status 0, or a trailers-only status carrying the metadata pairs of a
 * `GrpcStatusAnswer` — the same answer grpc-js would send for the same error
 * (src/ops/grpc-errors.ts is the one mapping).
 */
import { constants as h2, type ServerHttp2Stream } from 'node:http2';
import type { GrpcStatusAnswer } from '../ops/grpc-errors.js';
import { grpcMessage } from '../grpc/wire-format.js';
import { ACCEPT_ENCODING, type WireError } from './h2-request.js';

// Shared by every call (frozen: node:http2 copies, never writes, header objects).
const OK_HEADERS = Object.freeze({ [h2.HTTP2_HEADER_STATUS]: 200, 'content-type': 'application/grpc' });
const OK_TRAILERS = Object.freeze({ 'grpc-status': '0' });
const NO_METADATA: GrpcStatusAnswer['metadata'] = Object.freeze([]);

/** False once the call is over or answered (e.g. its deadline already answered it). */
export function open(stream: ServerHttp2Stream): boolean {
  return !stream.destroyed && !stream.closed && !stream.headersSent;
}

/** A status of the transport's own (limits, framing, routing): no metadata. */
export function transportStatus(code: number, details: string): GrpcStatusAnswer {
  return { code, details, metadata: NO_METADATA };
}

/** Answers trailers-only with `answer` (its metadata as headers, `-bin` values base64). */
export function sendStatus(stream: ServerHttp2Stream, answer: GrpcStatusAnswer, extra?: Readonly<Record<string, string>>): void {
  if (!open(stream)) return;
  const headers: Record<string, string | number> = {
    [h2.HTTP2_HEADER_STATUS]: 200,
    'content-type': 'application/grpc',
    'grpc-status': answer.code,
    'grpc-message': grpcMessage(answer.details),
    ...extra,
  };
  for (const [key, value] of answer.metadata) headers[key] = typeof value === 'string' ? value : value.toString('base64');
  stream.respond(headers, { endStream: true });
  // A client still sending (a body too large, too slow, or never coming) is told to stop with
  // RST_STREAM(NO_ERROR) after the status (RFC 9113 §8.1), so the stream is gone here at once.
  if (!stream.readableEnded) stream.close(h2.NGHTTP2_NO_ERROR);
}

/** Answers a request that could not be read (h2-request.ts) with its status. */
export function sendWireError(stream: ServerHttp2Stream, err: WireError): void {
  sendStatus(stream, transportStatus(err.grpcCode, err.message), err.acceptEncoding ? { 'grpc-accept-encoding': ACCEPT_ENCODING } : undefined);
}

/** Answers with one message (an already framed body) and grpc-status 0. */
export function sendFrame(stream: ServerHttp2Stream, framed: Buffer): void {
  if (!open(stream)) return;
  stream.respond(OK_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
  stream.end(framed);
}
