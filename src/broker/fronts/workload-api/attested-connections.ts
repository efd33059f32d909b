/**
 * The Workload API's connections and what attestation says about each. Every accepted socket
 * gets a tag as its `remoteAddress` (a Unix socket has none of its own), which is what grpc-js
 * reports as a call's `getPeer()`: the service finds the connection's attestation by it. The
 * attestation starts at accept and is forgotten when the socket closes.
 */
import type { Socket } from 'node:net';
import type { AttestedProcess, Attestation, ConnectionAttestation, ConnectionAttestor } from '../../attestation/index.js';
import { BrokerError } from '../../errors.js';
import { callerKey, type ConnectionLimits, type Release } from './connection-limits.js';

/** What the service needs: a call's connection attestation, and the re-check before each message. */
export interface CallerLookup {
  /** The attestation of the connection `peer` (a call's `getPeer()`), undefined for a connection not accepted here. */
  attestationOf(peer: string): Promise<ConnectionAttestation> | undefined;
  recheck(process: AttestedProcess): Attestation;
  /** Set when the connection `peer` is past its caller's connection bound: every call on it is refused with it. */
  limitOf?(peer: string): BrokerError | undefined;
}

const TAG_PREFIX = 'workload-api-connection-';

interface Connection {
  readonly socket: Socket;
  /** The boot clock at accept (undefined when /proc/uptime could not be read: the attestation then says why). */
  readonly acceptedAt: number | undefined;
  attestation: Promise<ConnectionAttestation>;
  readonly releases: Release[];
  /** Past its caller's connection bound (set once attested). */
  refusal: BrokerError | undefined;
  /** Counted against its caller already. */
  claimed: boolean;
  closed: boolean;
}

export class AttestedConnections implements CallerLookup {
  readonly #attestor: ConnectionAttestor;
  readonly #limits: ConnectionLimits | undefined;
  readonly #byTag = new Map<string, Connection>();
  #next = 0;

  constructor(attestor: ConnectionAttestor, limits?: ConnectionLimits) {
    this.#attestor = attestor;
    this.#limits = limits;
  }

  get limits(): ConnectionLimits | undefined {
    return this.#limits;
  }

  /** Connections open now. */
  get size(): number {
    return this.#byTag.size;
  }

  get attestor(): ConnectionAttestor {
    return this.#attestor;
  }

  /**
   * Tags `socket` and starts its attestation; call it as the socket is accepted, before anything
   * reads from it. False (the socket destroyed) when the socket's connection bound is reached.
   */
  accept(socket: Socket): boolean {
    const slot = this.#limits ? this.#limits.connection() : () => undefined;
    if (!slot) {
      socket.destroy();
      return false;
    }
    const tag = `${TAG_PREFIX}${++this.#next}`;
    Object.defineProperty(socket, 'remoteAddress', { value: tag, configurable: true, enumerable: true });
    let acceptedAt: number | undefined;
    try {
      acceptedAt = this.#attestor.processes.nowTicks();
    } catch {
      acceptedAt = undefined;
    }
    const c: Connection = { socket, acceptedAt, attestation: this.#attestor.attest(socket, acceptedAt), releases: [slot], refusal: undefined, claimed: false, closed: false };
    c.attestation = c.attestation.then((result) => this.#claim(c, result));
    this.#byTag.set(tag, c);
    socket.once('close', () => {
      c.closed = true;
      this.#byTag.delete(tag);
      for (const release of c.releases) release();
    });
    return true;
  }

  limitOf(peer: string): BrokerError | undefined {
    return this.#byTag.get(peer)?.refusal;
  }

  /** The first time the caller of `c` is known, counts `c` against that caller's bound. */
  #claim(c: Connection, result: ConnectionAttestation): ConnectionAttestation {
    const key = callerKey(result);
    if (!this.#limits || key === undefined || c.claimed || c.closed) return result;
    c.claimed = true;
    try {
      c.releases.push(this.#limits.callerConnection(key));
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      c.refusal = err;
    }
    return result;
  }

  /**
   * The connection's attestation. One that could not be made (`unavailable`: the helper failed or
   * timed out) is made again for the next call on that connection, still measured against the
   * accept time: SPIFFE clients retry on the connection they hold, which would otherwise stay
   * refused until they reconnect. Every other outcome is final for the connection.
   */
  attestationOf(peer: string): Promise<ConnectionAttestation> | undefined {
    const c = this.#byTag.get(peer);
    if (!c) return undefined;
    const current = c.attestation;
    return current.then((result) => {
      if (result.ok || result.reason !== 'unavailable' || c.socket.destroyed) return result;
      if (c.attestation === current) c.attestation = this.#attestor.attest(c.socket, c.acceptedAt).then((again) => this.#claim(c, again));
      return c.attestation;
    });
  }

  recheck(process: AttestedProcess): Attestation {
    return this.#attestor.processes.recheck(process);
  }
}
