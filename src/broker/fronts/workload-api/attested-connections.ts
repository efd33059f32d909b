/**
 * The Workload API's connections and what attestation says about each. Every accepted socket
 * gets a tag as its `remoteAddress` (a Unix socket has none of its own), which is what grpc-js
 * reports as a call's `getPeer()`: the service finds the connection's attestation by it. The
 * attestation starts at accept and is forgotten when the socket closes.
 */
import type { Socket } from 'node:net';
import type { AttestedProcess, Attestation, ConnectionAttestation, ConnectionAttestor } from '../../attestation/index.js';

/** What the service needs: a call's connection attestation, and the re-check before each message. */
export interface CallerLookup {
  /** The attestation of the connection `peer` (a call's `getPeer()`), undefined for a connection not accepted here. */
  attestationOf(peer: string): Promise<ConnectionAttestation> | undefined;
  recheck(process: AttestedProcess): Attestation;
}

const TAG_PREFIX = 'workload-api-connection-';

interface Connection {
  readonly socket: Socket;
  /** The boot clock at accept (undefined when /proc/uptime could not be read: the attestation then says why). */
  readonly acceptedAt: number | undefined;
  attestation: Promise<ConnectionAttestation>;
}

export class AttestedConnections implements CallerLookup {
  readonly #attestor: ConnectionAttestor;
  readonly #byTag = new Map<string, Connection>();
  #next = 0;

  constructor(attestor: ConnectionAttestor) {
    this.#attestor = attestor;
  }

  /** Connections open now. */
  get size(): number {
    return this.#byTag.size;
  }

  get attestor(): ConnectionAttestor {
    return this.#attestor;
  }

  /** Tags `socket` and starts its attestation; call it as the socket is accepted, before anything reads from it. */
  accept(socket: Socket): void {
    const tag = `${TAG_PREFIX}${++this.#next}`;
    Object.defineProperty(socket, 'remoteAddress', { value: tag, configurable: true, enumerable: true });
    let acceptedAt: number | undefined;
    try {
      acceptedAt = this.#attestor.processes.nowTicks();
    } catch {
      acceptedAt = undefined;
    }
    this.#byTag.set(tag, { socket, acceptedAt, attestation: this.#attestor.attest(socket, acceptedAt) });
    socket.once('close', () => this.#byTag.delete(tag));
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
      if (c.attestation === current) c.attestation = this.#attestor.attest(c.socket, c.acceptedAt);
      return c.attestation;
    });
  }

  recheck(process: AttestedProcess): Attestation {
    return this.#attestor.processes.recheck(process);
  }
}
