/**
 * Writing a gRPC answer on a call of either HTTP/2 engine (grpc-call.ts): one message with
 * grpc-status 0, or a trailers-only status carrying the metadata pairs of a `GrpcStatusAnswer` —
 * the same answer grpc-js would send for the same error (src/ops/grpc-errors.ts is the one
 * mapping).
 */
import type { GrpcStatusAnswer } from '../ops/grpc-errors.js';
import { grpcMessage } from '../grpc/wire-format.js';
import type { ResponseFields, ServerCall } from './grpc-call.js';
import { ACCEPT_ENCODING, type WireError } from './h2-request.js';

const NO_METADATA: GrpcStatusAnswer['metadata'] = Object.freeze([]);

/** A status of the transport's own (limits, framing, routing): no metadata. */
export function transportStatus(code: number, details: string): GrpcStatusAnswer {
  return { code, details, metadata: NO_METADATA };
}

/** Answers trailers-only with `answer` (its metadata as headers, `-bin` values base64). */
export function sendStatus(call: ServerCall, answer: GrpcStatusAnswer, extra?: Readonly<Record<string, string>>): void {
  if (!call.open()) return;
  const fields: Array<readonly [string, string]> = [
    [':status', '200'],
    ['content-type', 'application/grpc'],
    ['grpc-status', String(answer.code)],
    ['grpc-message', grpcMessage(answer.details)],
  ];
  if (extra) for (const key of Object.keys(extra)) fields.push([key, extra[key]!]);
  for (const [key, value] of answer.metadata) fields.push([key, typeof value === 'string' ? value : value.toString('base64')]);
  // A client still sending (a body too large, too slow, or never coming) is told to stop with
  // RST_STREAM(NO_ERROR) after the status (RFC 9113 §8.1), so the stream is gone here at once.
  call.sendTrailersOnly(fields satisfies ResponseFields);
}

/** Answers a request that could not be read (h2-request.ts) with its status. */
export function sendWireError(call: ServerCall, err: WireError): void {
  sendStatus(call, transportStatus(err.grpcCode, err.message), err.acceptEncoding ? { 'grpc-accept-encoding': ACCEPT_ENCODING } : undefined);
}

/** Answers with one message (an already framed body) and grpc-status 0. */
export function sendFrame(call: ServerCall, framed: Buffer): void {
  if (call.open()) call.sendMessage(framed);
}
