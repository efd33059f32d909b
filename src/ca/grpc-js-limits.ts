/**
 * The CA's limits (limits.ts) as far as the grpc-js transport can apply them. grpc-js exposes
 * no handle on its node:http2 server, so the TLS handshake timeout (node's default, 120 s,
 * applies), the connection cap, the global stream cap and the header-list bound are http2-transport
 * only; what grpc-js does offer is used here: MAX_CONNECTION_IDLE, SETTINGS_MAX_CONCURRENT_STREAMS,
 * node's per-session memory bound (grpc-js turns it off by default), and a server interceptor
 * for the request-body deadline, which also reports a call closed before its request was complete.
 * Requests grpc-js refuses itself (too large, unreadable) never reach an interceptor, so
 * `unreadable` is not reported here.
 */
import { constants as h2 } from 'node:http2';
import { Duplex } from 'node:stream';
import { ServerInterceptingCall, ServerListenerBuilder, status as GrpcStatus, type ServerInterceptingCallInterface, type ServerInterceptor, type ServerOptions } from '@grpc/grpc-js';
import type { CaLimits } from './limits.js';
import type { StreamRefusalReason } from './metrics.js';

/** node:http2's own default per-session memory bound, in MB (grpc-js sets it to unlimited). */
export const GRPC_JS_MAX_SESSION_MEMORY_MB = 10;

/** The refusals the grpc-js transport can see (metrics.ts `certbroker_ca_streams_refused_total`). */
export type GrpcJsRefusal = Extract<StreamRefusalReason, 'body_timeout' | 'cancelled'>;

export function grpcJsLimitOptions(limits: CaLimits, onRefused: (reason: GrpcJsRefusal) => void): ServerOptions {
  return {
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
    'grpc.max_connection_idle_ms': limits.idleSessionTimeoutMs,
    'grpc-node.max_session_memory': GRPC_JS_MAX_SESSION_MEMORY_MB,
    interceptors: [requestBodyDeadline(limits.requestBodyTimeoutMs, onRefused)],
  };
}

/**
 * A call with a single request message (unary, server streaming) whose message and half-close
 * have not arrived `ms` after it started gets DEADLINE_EXCEEDED (`body_timeout`), so a stream
 * opened with headers only does not hold its connection for ever. One that the client resets
 * (or whose connection goes) before its whole message and half-close arrived is reported
 * `cancelled`, and the handler never gets it. (node:http2 ends a reset stream's readable side as if
 * the body had ended, so grpc-js sees a half-close there too, after a whole message even; the
 * stream's reset code tells the two apart.) Client- and bidi-streaming calls (reflection) are left
 * alone: their request side stays open by design.
 */
export function requestBodyDeadline(ms: number, onRefused: (reason: GrpcJsRefusal) => void): ServerInterceptor {
  return (method, call) => {
    if (method.requestStream) return new ServerInterceptingCall(call);
    let timer: NodeJS.Timeout | undefined;
    let message = false;
    // The handler has the call (its message and half-close arrived), or this call was reported already.
    let settled = false;
    const stop = () => clearTimeout(timer);
    return new ServerInterceptingCall(call, {
      start(next) {
        timer = setTimeout(() => {
          settled = true;
          onRefused('body_timeout');
          call.sendStatus({ code: GrpcStatus.DEADLINE_EXCEEDED, details: `request message not received within ${ms} ms` });
          closeStream(call);
        }, ms);
        next(
          new ServerListenerBuilder()
            .withOnReceiveMessage((m, proceed) => {
              message = true;
              proceed(m);
            })
            .withOnReceiveHalfClose((proceed) => {
              stop();
              // A reset stream's end is no half-close: the handler does not get the call.
              if (resetByPeer(call)) return;
              if (message) settled = true;
              proceed();
            })
            // grpc-js calls this when the stream closes, however it ended.
            .withOnCancel(() => {
              stop();
              if (settled || !resetByPeer(call)) return;
              settled = true;
              onRefused('cancelled');
            })
            .build(),
        );
      },
      sendStatus(status, proceed) {
        stop();
        proceed(status);
      },
    });
  };
}

/** The node stream under grpc-js's call (see closeStream), when this grpc-js keeps it where 1.14 does. */
function nodeStream(call: ServerInterceptingCallInterface): (Duplex & { rstCode?: unknown }) | undefined {
  const stream = 'stream' in call ? call.stream : undefined;
  return stream instanceof Duplex ? stream : undefined;
}

/** The peer reset the stream, or its connection went (any reset code but NO_ERROR). */
function resetByPeer(call: ServerInterceptingCallInterface): boolean {
  const code = nodeStream(call)?.rstCode;
  return typeof code === 'number' && code !== h2.NGHTTP2_NO_ERROR;
}

/**
 * After a status, grpc-js leaves the HTTP/2 stream open while the client's side is (node closes
 * a finished server stream by itself only when nobody read from it), so a client that never
 * ends its request would keep the stream, and with it the connection (never idle), for ever.
 * grpc-js offers no way to close it; its base call keeps the node stream as `stream`, which is
 * reset here with NO_ERROR after the status, as RFC 9113 §8.1 allows. Guarded: if a grpc-js
 * version moves it, nothing happens (and test/ca/transport-limits.e2e.test.ts fails).
 */
function closeStream(call: ServerInterceptingCallInterface): void {
  const stream = nodeStream(call);
  if (stream === undefined || !('close' in stream) || typeof stream.close !== 'function') return;
  if (stream.closed === false && stream.readableEnded === false) stream.close(h2.NGHTTP2_NO_ERROR);
}
