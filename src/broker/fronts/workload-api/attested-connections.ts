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

export class AttestedConnections implements CallerLookup {
  readonly #attestor: ConnectionAttestor;
  readonly #byTag = new Map<string, Promise<ConnectionAttestation>>();
  #next = 0;

  constructor(attestor: ConnectionAttestor) {
    this.#attestor = attestor;
  }

  /** Connections open now. */
  get size(): number {
    return this.#byTag.size;
  }

  /** Tags `socket` and starts its attestation; call it as the socket is accepted, before anything reads from it. */
  accept(socket: Socket): void {
    const tag = `${TAG_PREFIX}${++this.#next}`;
    Object.defineProperty(socket, 'remoteAddress', { value: tag, configurable: true, enumerable: true });
    this.#byTag.set(tag, this.#attestor.attest(socket));
    socket.once('close', () => this.#byTag.delete(tag));
  }

  attestationOf(peer: string): Promise<ConnectionAttestation> | undefined {
    return this.#byTag.get(peer);
  }

  get attestor(): ConnectionAttestor {
    return this.#attestor;
  }

  recheck(process: AttestedProcess): Attestation {
    return this.#attestor.processes.recheck(process);
  }
}
