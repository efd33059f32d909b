/**
 * One gRPC call as the CA's TLS transports serve it, whichever HTTP/2 engine carries it: the
 * request's headers, its body as callbacks, and the few ways a unary call is answered (one
 * message + grpc-status 0, trailers-only status, 415 for non-gRPC) plus the hand-off to the
 * loopback relay. The gRPC method logic (h2-transport.ts, h2-request.ts, h2-respond.ts) is
 * written once over this interface; node-call.ts implements it on node:http2 streams,
 * engine-call.ts on certbroker's engine (src/h2).
 */
import type { Duplex } from 'node:stream';

/** Request headers (pseudo-header fields included), as both engines deliver them. */
export type CallHeaders = Readonly<Record<string, string | string[] | undefined>>;
/** Response fields in order (`:status` first); a repeated name is repeated. */
export type ResponseFields = ReadonlyArray<readonly [string, string]>;

/** What the loopback relay (h2-relay.ts) needs of a call: its body both ways and its head/trailers. */
export interface RelayedCall {
  /** Readable: the request body; writable: the response body (after `respondHead`). */
  readonly body: Duplex;
  /**
   * Sends the response head; `trailersOnly`: it is the whole answer. Otherwise the response ends
   * when `body` ends, with the fields `trailers()` gives then.
   */
  respondHead(fields: ResponseFields, trailersOnly: boolean, trailers: () => ResponseFields): void;
  /** Resets the call (CANCEL) unless it is over. */
  cancel(): void;
}

export interface ServerCall {
  readonly headers: CallHeaders;
  /** `address:port` of the client, for logs. */
  readonly peer: string;
  /** The connection (session) the call is on: the key for per-connection bookkeeping. */
  readonly session: object;
  /** Delivers the request body: chunks (views: copy to keep), its end, or the call closing first. */
  readBody(onData: (chunk: Buffer) => void, onEnd: () => void, onClosedEarly: () => void): void;
  /** The body is not wanted (answered already): let it drain. */
  discardBody(): void;
  /** Calls `listener` once the call is over (answered, reset, or its connection gone). */
  onClose(listener: () => void): void;
  /** Not answered yet and not closed. */
  open(): boolean;
  /** Answers trailers-only: `:status` 200 and the status fields. A client still sending is told to stop (RST_STREAM NO_ERROR, RFC 9113 §8.1). */
  sendTrailersOnly(fields: ResponseFields): void;
  /** Answers one framed message, then grpc-status 0. */
  sendMessage(framed: Buffer): void;
  /** Answers HTTP 415 (not a gRPC request). */
  refuseNotGrpc(): void;
  /** The call for the loopback relay (made once, when relayed). */
  relayed(): RelayedCall;
}
