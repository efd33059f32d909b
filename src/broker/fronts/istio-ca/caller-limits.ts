/**
 * Per-caller bounds of the Istio CA front: at most `maxInFlight` requests of one caller at a
 * time, and a token bucket of `burst` requests refilled at `ratePerSecond`. The caller is its pod
 * (the UID its token is bound to), so one ztunnel cannot crowd out the node's CA calls for long
 * and a misbehaving one is answered locally. Over a bound: RESOURCE_EXHAUSTED (ztunnel retries
 * with backoff) with a retry pushback (gRFC A6: `grpc-retry-pushback-ms`): over the rate, the time
 * until the bucket holds a whole token again; over the in-flight bound, the caller's typical call
 * duration (a moving average of its calls' durations, the time one slot is expected to take to
 * free), none before one of its calls has ended. Time comes from the injected clock; the map of
 * callers is bounded (idle callers with a full bucket are the ones dropped). Pure.
 */
import type { Clock } from '../../../core/clock.js';
import { BrokerError } from '../../errors.js';

export interface CallerLimitsOptions {
  readonly clock: Clock;
  readonly ratePerSecond: number;
  readonly burst: number;
  readonly maxInFlight: number;
  /** Callers remembered at most (a node runs one ztunnel; the bound is against churn). Default 1024. */
  readonly maxCallers?: number;
}

interface Bucket {
  tokens: number;
  at: number;
  inFlight: number;
  /** Moving average of this caller's call durations in ms (-1: no call has ended yet). */
  callMs: number;
}

/** Weight of the newest call in `callMs` (the average follows the last ~4 calls). */
const CALL_MS_WEIGHT = 0.25;

export class CallerLimits {
  readonly #o: CallerLimitsOptions;
  readonly #buckets = new Map<string, Bucket>();

  constructor(options: CallerLimitsOptions) {
    this.#o = options;
  }

  /** Takes one request slot for `caller`; returns its release (call once), or throws ERR_FRONT_RATE_LIMITED. */
  acquire(caller: string): () => void {
    const now = this.#o.clock.now();
    const b = this.#bucket(caller, now);
    b.tokens = Math.min(this.#o.burst, b.tokens + ((now - b.at) / 1000) * this.#o.ratePerSecond);
    b.at = now;
    if (b.inFlight >= this.#o.maxInFlight) {
      const slotMs = b.callMs < 0 ? undefined : Math.max(1, Math.ceil(b.callMs));
      throw limited(`caller ${caller} has ${b.inFlight} requests in flight (at most ${this.#o.maxInFlight})`, slotMs);
    }
    if (b.tokens < 1) {
      // Rounded up to whole milliseconds (less a hair of floating-point error), at least 1.
      const refillMs = Math.max(1, Math.ceil(((1 - b.tokens) / this.#o.ratePerSecond) * 1000 - 1e-6));
      throw limited(`caller ${caller} exceeded ${this.#o.ratePerSecond} requests/s (burst ${this.#o.burst})`, refillMs);
    }
    b.tokens -= 1;
    b.inFlight += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      b.inFlight -= 1;
      const tookMs = Math.max(0, this.#o.clock.now() - now);
      b.callMs = b.callMs < 0 ? tookMs : b.callMs + CALL_MS_WEIGHT * (tookMs - b.callMs);
    };
  }

  /** Requests in flight for `caller` (metrics, tests). */
  inFlight(caller: string): number {
    return this.#buckets.get(caller)?.inFlight ?? 0;
  }

  #bucket(caller: string, now: number): Bucket {
    let b = this.#buckets.get(caller);
    if (b) return b;
    const max = this.#o.maxCallers ?? 1024;
    if (this.#buckets.size >= max) this.#evictIdle(now);
    b = { tokens: this.#o.burst, at: now, inFlight: 0, callMs: -1 };
    this.#buckets.set(caller, b);
    return b;
  }

  /** Drops callers with nothing in flight whose bucket has refilled (they lose nothing). */
  #evictIdle(now: number): void {
    for (const [k, b] of this.#buckets) {
      if (b.inFlight === 0 && b.tokens + ((now - b.at) / 1000) * this.#o.ratePerSecond >= this.#o.burst) this.#buckets.delete(k);
    }
    // Still full: the oldest idle one goes (a caller with requests in flight is never forgotten).
    if (this.#buckets.size >= (this.#o.maxCallers ?? 1024)) {
      for (const [k, b] of this.#buckets) {
        if (b.inFlight === 0) {
          this.#buckets.delete(k);
          return;
        }
      }
    }
  }
}

function limited(message: string, retryAfterMs?: number): BrokerError {
  return new BrokerError('ERR_FRONT_RATE_LIMITED', message, { status: 'resource-exhausted', publicMessage: 'too many certificate requests; retry later', retryAfterMs });
}
