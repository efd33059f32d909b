/**
 * The body of `POST /devcluster/faults` (admin only), for processes that cannot reach the TS
 * handle: `{"latencyMs": 50, "fail429": {"count": 3, "retryAfterSeconds": 2, "path": "/pods"},
 * "fail500": {"count": 1}, "dropWatches": true, "compact": true, "clear": true}`.
 */
import type { Faults } from './faults.js';
import { badRequest } from './status.js';

function count(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw badRequest(`${what} must be a non-negative integer`);
  return v;
}

function failureSpec(v: unknown): { count: number; retryAfterSeconds?: number; path?: string } {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw badRequest('fail429/fail500 must be objects with a count');
  const o = v as Record<string, unknown>;
  return {
    count: count(o.count, 'count'),
    ...(o.retryAfterSeconds !== undefined ? { retryAfterSeconds: count(o.retryAfterSeconds, 'retryAfterSeconds') } : {}),
    ...(typeof o.path === 'string' ? { path: o.path } : {}),
  };
}

/** Validates and applies one fault request; returns how many watches it dropped. */
export function applyFaultRequest(faults: Faults, body: Readonly<Record<string, unknown>>): number {
  // Validate everything before changing anything.
  const latency = body.latencyMs === undefined ? undefined : count(body.latencyMs, 'latencyMs');
  const f429 = body.fail429 === undefined ? undefined : failureSpec(body.fail429);
  const f500 = body.fail500 === undefined ? undefined : failureSpec(body.fail500);
  if (body.clear === true) faults.clear();
  if (latency !== undefined) faults.setLatency(latency);
  if (f429) {
    faults.failWith429(f429.count, {
      ...(f429.retryAfterSeconds !== undefined ? { retryAfterSeconds: f429.retryAfterSeconds } : {}),
      ...(f429.path ? { match: { path: f429.path } } : {}),
    });
  }
  if (f500) faults.failWith500(f500.count, f500.path ? { match: { path: f500.path } } : {});
  const dropped = body.dropWatches === true ? faults.dropWatches() : 0;
  if (body.compact === true) faults.compact();
  return dropped;
}
