/**
 * A server's retry pushback (gRFC A6, `grpc-retry-pushback-ms`): the milliseconds the server
 * asked the client to wait before trying again. Written once (`retryPushbackValue`: the CA's
 * stream cap, every error that carries `retryAfterMs` through grpcStatusFor) and read once: the
 * broker's CA channel (grpc-js trailers), its lean HTTP/2 channel and the churn benchmark's raw
 * HTTP/2 client. A value that is not a non-negative decimal integer is no hint at all.
 */
import type { Metadata } from '@grpc/grpc-js';
import { RETRY_PUSHBACK_METADATA } from '../protocol/grpc-status.js';

export { RETRY_PUSHBACK_METADATA };

/** `ms` as the pushback's value: a non-negative whole number of milliseconds. */
export function retryPushbackValue(ms: number): string {
  return String(Math.max(0, Math.round(ms)));
}

/** The pushback in ms, or undefined when `value` is absent or not a non-negative integer. */
export function parseRetryPushbackMs(value: unknown): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (typeof text !== 'string' || !/^\d{1,10}$/u.test(text)) return undefined;
  return Number(text);
}

/** The pushback a grpc-js call's trailers carry (a ServiceError's `metadata`), if any. */
export function retryPushbackOf(metadata: Metadata | undefined): number | undefined {
  return parseRetryPushbackMs(metadata?.get(RETRY_PUSHBACK_METADATA).map(String));
}
