/**
 * The Workload API's bounds (workload-api-config.ts, WorkloadApiLimits): connections and streams
 * open at once, per caller and for the whole socket. A caller is what attestation found: its pod
 * (`pod:<uid>`), or, for a process in no pod (refused anyway, but able to open connections), its
 * PID (`pid:<n>`). A connection past the global bound is closed at accept; one past its caller's
 * bound stays open and every call on it answers RESOURCE_EXHAUSTED; a stream past either stream
 * bound answers RESOURCE_EXHAUSTED. Each slot is released once (`release()` is idempotent).
 * Plain bookkeeping; the observer hears every refusal (metrics, throttled logs).
 */
import type { ConnectionAttestation } from '../../attestation/index.js';
import { BrokerError } from '../../errors.js';

export type WorkloadApiLimit = 'connections' | 'connections-per-caller' | 'streams' | 'streams-per-caller';

export interface WorkloadApiLimitsConfig {
  readonly maxConnections: number;
  readonly maxConnectionsPerCaller: number;
  readonly maxStreams: number;
  readonly maxStreamsPerCaller: number;
}

export interface ConnectionLimitsObserver {
  limited?(limit: WorkloadApiLimit, caller: string | undefined, detail: string): void;
}

/** A held slot; release it once (further calls do nothing). */
export type Release = () => void;

/** The caller key of a pod. */
export function podCallerKey(uid: string): string {
  return `pod:${uid}`;
}

/** The caller key of an attestation: its pod, or its PID when it is in none; undefined when the kernel gave no answer. */
export function callerKey(attestation: ConnectionAttestation): string | undefined {
  if (attestation.ok) return podCallerKey(attestation.process.pod.podUid);
  if (attestation.reason === 'unavailable') return undefined;
  return `pid:${attestation.peer.pid}`;
}

export function limitReached(limit: WorkloadApiLimit, detail: string): BrokerError {
  return new BrokerError('ERR_WORKLOAD_API_LIMIT', `Workload API ${limit} bound reached: ${detail}`, {
    status: 'resource-exhausted',
    publicMessage: `too many Workload API ${limit.startsWith('connections') ? 'connections' : 'streams'} (${limit}): ${detail}`,
  });
}

function once(f: () => void): Release {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    f();
  };
}

export class ConnectionLimits {
  readonly #c: WorkloadApiLimitsConfig;
  readonly #observer: ConnectionLimitsObserver | undefined;
  readonly #connectionsOf = new Map<string, number>();
  readonly #streamsOf = new Map<string, number>();
  #connections = 0;
  #streams = 0;

  constructor(config: WorkloadApiLimitsConfig, observer?: ConnectionLimitsObserver) {
    this.#c = config;
    this.#observer = observer;
  }

  get config(): WorkloadApiLimitsConfig {
    return this.#c;
  }

  /** Connections and streams held now, in total and of `caller`. */
  held(caller?: string): { connections: number; streams: number } {
    if (caller === undefined) return { connections: this.#connections, streams: this.#streams };
    return { connections: this.#connectionsOf.get(caller) ?? 0, streams: this.#streamsOf.get(caller) ?? 0 };
  }

  /** A slot for a connection just accepted, or undefined: close it. */
  connection(): Release | undefined {
    if (this.#connections >= this.#c.maxConnections) {
      this.#observer?.limited?.('connections', undefined, `${this.#connections} connections open (at most ${this.#c.maxConnections})`);
      return undefined;
    }
    this.#connections++;
    return once(() => this.#connections--);
  }

  /** A slot for a connection of `caller` (once attested); throws ERR_WORKLOAD_API_LIMIT past the bound. */
  callerConnection(caller: string): Release {
    return this.#take(this.#connectionsOf, caller, this.#c.maxConnectionsPerCaller, 'connections-per-caller');
  }

  /** A slot for a stream of `caller`; throws ERR_WORKLOAD_API_LIMIT past either stream bound. */
  stream(caller: string): Release {
    if (this.#streams >= this.#c.maxStreams) {
      const detail = `${this.#streams} streams open (at most ${this.#c.maxStreams})`;
      this.#observer?.limited?.('streams', caller, detail);
      throw limitReached('streams', detail);
    }
    const release = this.#take(this.#streamsOf, caller, this.#c.maxStreamsPerCaller, 'streams-per-caller');
    this.#streams++;
    return once(() => {
      this.#streams--;
      release();
    });
  }

  #take(counts: Map<string, number>, caller: string, max: number, limit: WorkloadApiLimit): Release {
    const n = counts.get(caller) ?? 0;
    if (n >= max) {
      const detail = `${caller} has ${n} open (at most ${max})`;
      this.#observer?.limited?.(limit, caller, detail);
      throw limitReached(limit, detail);
    }
    counts.set(caller, n + 1);
    return once(() => {
      const left = (counts.get(caller) ?? 1) - 1;
      if (left <= 0) counts.delete(caller);
      else counts.set(caller, left);
    });
  }
}
