/**
 * One accepted connection -> the process that opened it and its pod: the peer's PID from the
 * kernel (SO_PEERCRED), then the process attestation at that PID. Started the moment a connection
 * is accepted, so it runs while the client is still sending its HTTP/2 preface and first request.
 * Glue over two interfaces; no I/O of its own.
 */
import type { Socket } from 'node:net';
import { describeError } from '../../core/errors.js';
import type { PeerCredentials, PeerCredentialsSource } from './peer-credentials.js';
import type { Attestation, AttestationFailure, ProcessAttestor } from './process-attestor.js';

/** How an attestation ended, for metrics: attested, a reason for no pod, or unavailable (no answer from the kernel side). */
export type AttestationOutcome = 'attested' | AttestationFailure | 'unavailable';

export type ConnectionAttestation =
  | (Attestation & { readonly peer: PeerCredentials })
  | { readonly ok: false; readonly reason: 'unavailable'; readonly detail: string; readonly error: unknown };

export interface ConnectionAttestorObserver {
  attested?(outcome: AttestationOutcome, ms: number): void;
}

export interface ConnectionAttestorOptions {
  readonly peers: PeerCredentialsSource;
  readonly processes: ProcessAttestor;
  /** Monotonic milliseconds, for the latency the observer hears. Default `performance.now`. */
  readonly now?: () => number;
  readonly observer?: ConnectionAttestorObserver;
}

export class ConnectionAttestor {
  readonly #o: ConnectionAttestorOptions;
  readonly #now: () => number;

  constructor(options: ConnectionAttestorOptions) {
    this.#o = options;
    this.#now = options.now ?? (() => performance.now());
  }

  get processes(): ProcessAttestor {
    return this.#o.processes;
  }

  get peers(): PeerCredentialsSource {
    return this.#o.peers;
  }

  /**
   * Attests the peer of `socket`. `acceptedAtTicks`: the boot clock when it was accepted
   * (`processes.nowTicks()`, read then); default now, for a socket just accepted. Never rejects.
   */
  async attest(socket: Socket, acceptedAtTicks?: number): Promise<ConnectionAttestation> {
    const started = this.#now();
    let result: ConnectionAttestation;
    try {
      const acceptedAt = acceptedAtTicks ?? this.#o.processes.nowTicks();
      const peer = await this.#o.peers.read(socket);
      result = { ...this.#o.processes.attest(peer.pid, acceptedAt), peer };
    } catch (error) {
      result = { ok: false, reason: 'unavailable', detail: describeError(error), error };
    }
    this.#o.observer?.attested?.(result.ok ? 'attested' : result.reason, this.#now() - started);
    return result;
  }
}
