/**
 * The body of `POST /devcluster/faults` (admin only), for processes that cannot reach the TS
 * handle: `{"latencyMs": 50, "fail429": {"count": 3, "retryAfterSeconds": 2, "path": "/pods",
 * "onlyWatch": true}, "fail500": {"count": 1, "exceptWatch": true}, "expireContinue": {"count": 1},
 * "silenceWatches": {"newWatches": 2, "path": "/pods"}, "dropWatches": true, "compact": true,
 * "clear": true}` (`"silenceWatches": true` silences the open watches only).
 */
import type { FaultMatch, Faults } from './faults.js';
import { badRequest } from './status.js';

function count(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw badRequest(`${what} must be a non-negative integer`);
  return v;
}

function object(v: unknown, what: string): Record<string, unknown> {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw badRequest(`${what} must be an object`);
  return v as Record<string, unknown>;
}

function matchOf(o: Record<string, unknown>): FaultMatch | undefined {
  const m: FaultMatch = {
    ...(typeof o.path === 'string' ? { path: o.path } : {}),
    ...(o.onlyWatch === true ? { onlyWatch: true } : {}),
    ...(o.exceptWatch === true ? { exceptWatch: true } : {}),
  };
  return Object.keys(m).length > 0 ? m : undefined;
}

function failureSpec(v: unknown, what: string): { count: number; retryAfterSeconds?: number; match?: FaultMatch } {
  const o = object(v, `${what} (with a count)`);
  const match = matchOf(o);
  return {
    count: count(o.count, `${what}.count`),
    ...(o.retryAfterSeconds !== undefined ? { retryAfterSeconds: count(o.retryAfterSeconds, `${what}.retryAfterSeconds`) } : {}),
    ...(match ? { match } : {}),
  };
}

function silenceSpec(v: unknown): { newWatches: number; match?: FaultMatch } | undefined {
  if (v === undefined || v === false) return undefined;
  if (v === true) return { newWatches: 0 };
  const o = object(v, 'silenceWatches');
  const match = matchOf(o);
  return { newWatches: o.newWatches === undefined ? 0 : count(o.newWatches, 'silenceWatches.newWatches'), ...(match ? { match } : {}) };
}

/** Validates and applies one fault request; returns how many watches it dropped. */
export function applyFaultRequest(faults: Faults, body: Readonly<Record<string, unknown>>): number {
  // Validate everything before changing anything.
  const latency = body.latencyMs === undefined ? undefined : count(body.latencyMs, 'latencyMs');
  const f429 = body.fail429 === undefined ? undefined : failureSpec(body.fail429, 'fail429');
  const f500 = body.fail500 === undefined ? undefined : failureSpec(body.fail500, 'fail500');
  const f410 = body.expireContinue === undefined ? undefined : failureSpec(body.expireContinue, 'expireContinue');
  const silence = silenceSpec(body.silenceWatches);
  if (body.clear === true) faults.clear();
  if (latency !== undefined) faults.setLatency(latency);
  if (f429) {
    faults.failWith429(f429.count, {
      ...(f429.retryAfterSeconds !== undefined ? { retryAfterSeconds: f429.retryAfterSeconds } : {}),
      ...(f429.match ? { match: f429.match } : {}),
    });
  }
  if (f500) faults.failWith500(f500.count, f500.match ? { match: f500.match } : {});
  if (f410) faults.expireContinue(f410.count, f410.match ? { match: f410.match } : {});
  if (silence) faults.silenceWatches({ newWatches: silence.newWatches, ...(silence.match ? { match: silence.match } : {}) });
  const dropped = body.dropWatches === true ? faults.dropWatches() : 0;
  if (body.compact === true) faults.compact();
  return dropped;
}
