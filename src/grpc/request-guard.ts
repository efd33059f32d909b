/**
 * Makes unreadable request messages reach the service handler, so the service answers them with
 * its own status (the Broker API: INVALID_ARGUMENT with its error details) instead of grpc-js
 * answering for it:
 *
 * - `readableRequests(definition)`: every method's request deserializer returns an
 *   `UnreadableRequest` instead of throwing (grpc-js answers a throwing deserializer with
 *   INTERNAL "Error deserializing request");
 * - `compressionFlagGuard(pathPrefix)`: a server interceptor that reads the 5-byte gRPC message
 *   prefix of each request message itself and hands the handler an `UnreadableRequest` when the
 *   Compressed-Flag is set while the call declared no `grpc-encoding` (or `identity`), or when the
 *   flag is neither 0 nor 1. The gRPC HTTP/2 protocol allows the flag only with a declared
 *   encoding; grpc-js ignores the flag under `identity` and parses the bytes as if uncompressed
 *   (grpc-go refuses such a message). Messages compressed with a declared encoding grpc-js
 *   supports (gzip, deflate) are decompressed by grpc-js as before.
 *
 * The guard reads the HTTP/2 stream and the declared encoding of grpc-js's innermost server call
 * (`stream`, `incomingEncoding`; grpc-js 1.14 exposes no public hook for the message prefix).
 * Should a grpc-js release rename them, the guard logs once and lets calls through unguarded
 * (grpc-js's own behaviour); test/broker/request-framing.e2e.test.ts fails in that case.
 */
import { EventEmitter } from 'node:events';
import {
  ServerInterceptingCall,
  ServerListenerBuilder,
  type ServerInterceptingCallInterface,
  type ServerInterceptor,
  type ServiceDefinition,
} from '@grpc/grpc-js';
import type { Logger } from '../core/log.js';

/** What a handler receives in place of a request it cannot read. */
export class UnreadableRequest {
  constructor(readonly reason: string) {}
}

export function isUnreadableRequest(value: unknown): value is UnreadableRequest {
  return value instanceof UnreadableRequest;
}

/** A copy of `definition` whose request deserializers never throw. */
export function readableRequests(definition: ServiceDefinition): ServiceDefinition {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(definition)) {
    const deserialize = method.requestDeserialize;
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown => {
        try {
          return deserialize(bytes);
        } catch {
          return new UnreadableRequest('request message does not decode');
        }
      },
    };
  }
  return out as ServiceDefinition;
}

/** Splits a request body into gRPC messages just far enough to see each message's flag byte. */
class PrefixReader {
  /** Flag bytes of the messages whose prefix has been read, oldest first. */
  readonly flags: number[] = [];
  #header = Buffer.alloc(5);
  #headerFill = 0;
  #bodyLeft = 0;

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.#bodyLeft > 0) {
        const n = Math.min(this.#bodyLeft, chunk.length - at);
        this.#bodyLeft -= n;
        at += n;
        continue;
      }
      const n = Math.min(5 - this.#headerFill, chunk.length - at);
      chunk.copy(this.#header, this.#headerFill, at, at + n);
      this.#headerFill += n;
      at += n;
      if (this.#headerFill === 5) {
        this.flags.push(this.#header[0]!);
        this.#bodyLeft = this.#header.readUInt32BE(1);
        this.#headerFill = 0;
      }
    }
  }
}

/**
 * The HTTP/2 stream and declared encoding of grpc-js's innermost server call (not part of its
 * typed interface: read and checked at run time); undefined when this grpc-js has no such fields.
 */
function innerCall(call: ServerInterceptingCallInterface): { readonly stream: EventEmitter; readonly encoding: string } | undefined {
  if (!('stream' in call) || !('incomingEncoding' in call)) return undefined;
  const { stream, incomingEncoding } = call;
  if (!(stream instanceof EventEmitter) || typeof incomingEncoding !== 'string') return undefined;
  return { stream, encoding: incomingEncoding };
}

/** A server interceptor guarding the Compressed-Flag of requests to methods under `pathPrefix` (e.g. `/spiffe.broker.API/`). */
export function compressionFlagGuard(pathPrefix: string, logger: Logger): ServerInterceptor {
  let warned = false;
  return (method, call: ServerInterceptingCallInterface) => {
    if (!method.path.startsWith(pathPrefix)) return new ServerInterceptingCall(call);
    const inner = innerCall(call);
    if (!inner) {
      if (!warned) {
        warned = true;
        logger.warn('grpc-js internals changed: request Compressed-Flag is not checked', { path: method.path });
      }
      return new ServerInterceptingCall(call);
    }
    const { encoding } = inner;
    const reader = new PrefixReader();
    // Runs before grpc-js's own 'data' listener, which delivers each message asynchronously.
    inner.stream.prependListener('data', (chunk: Buffer) => reader.push(chunk));
    const unreadable = (flag: number): UnreadableRequest | undefined => {
      if (flag === 0) return undefined;
      if (flag !== 1) return new UnreadableRequest(`message prefix has Compressed-Flag ${flag}`);
      if (encoding === 'identity') return new UnreadableRequest('compressed message without grpc-encoding');
      return undefined;
    };
    return new ServerInterceptingCall(call, {
      start: (next) =>
        next(
          new ServerListenerBuilder()
            .withOnReceiveMessage((message, deliver) => {
              const flag = reader.flags.shift();
              deliver((flag === undefined ? undefined : unreadable(flag)) ?? message);
            })
            .build(),
        ),
    });
  };
}
