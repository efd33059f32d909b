/**
 * The broker's peer-credentials source: the long-lived helper (peer-credentials-helper.ts) when it
 * works here, the Perl-per-batch way (peer-credentials.ts) otherwise (adapter glue).
 *
 * `start(dir)` proves the helper on a throwaway connection of the broker's own (it must name the
 * broker's PID); when it cannot (an architecture without a known recvmsg number, a seccomp profile
 * refusing recvmsg, no SCM_RIGHTS), every read goes to the fallback from then on, and the observer
 * hears the mode and why. Afterwards a read the helper fails (it died, timed out, is restarting,
 * or its queue is full) is answered by the fallback, on the same still-open connection; a
 * connection closed before it was read fails (ERR_PEER_CLOSED), with nothing left to attest.
 */
import type { Socket } from 'node:net';
import { describeError } from '../../core/errors.js';
import { BrokerError } from '../errors.js';
import type { PeerCredentials, PeerCredentialsSource } from './peer-credentials.js';
import { verifyPeerCredentials } from './peer-credentials-check.js';
import type { PeerCredentialsHelper } from './peer-credentials-helper.js';
import { socketFd } from './socket-fd.js';

/** `helper`: one long-lived Perl reads every connection; `batch`: a Perl start per batch of connections. */
export type PeerCredentialsMode = 'helper' | 'batch';

export interface PeerCredentialsFallbackObserver {
  /** The mode chosen at start; `reason` says why the helper is not used. */
  mode?(mode: PeerCredentialsMode, reason?: string): void;
  /** One read answered by the fallback after the helper failed it (`reason`). */
  fellBack?(reason: string): void;
}

export interface PeerCredentialsFallbackOptions {
  readonly observer?: PeerCredentialsFallbackObserver;
  /** Set: the helper is not even tried (configured off); the reason the observer hears. */
  readonly helperDisabled?: string;
}

export class PeerCredentialsWithFallback implements PeerCredentialsSource {
  readonly #helper: PeerCredentialsHelper;
  readonly #fallback: PeerCredentialsSource;
  readonly #observer: PeerCredentialsFallbackObserver | undefined;
  readonly #disabled: string | undefined;
  #mode: PeerCredentialsMode = 'batch';

  constructor(helper: PeerCredentialsHelper, fallback: PeerCredentialsSource, options: PeerCredentialsFallbackOptions = {}) {
    this.#helper = helper;
    this.#fallback = fallback;
    this.#observer = options.observer;
    this.#disabled = options.helperDisabled;
  }

  get mode(): PeerCredentialsMode {
    return this.#mode;
  }

  get helper(): PeerCredentialsHelper {
    return this.#helper;
  }

  /** Starts the helper and proves it (a socket in `dir`); picks the mode. Never rejects. */
  async start(dir: string): Promise<PeerCredentialsMode> {
    let reason = this.#disabled ?? this.#helper.unsupported;
    if (reason === undefined) {
      try {
        this.#helper.launch();
        await verifyPeerCredentials(this.#helper, dir);
      } catch (err) {
        reason = describeError(err);
        this.#helper.stop();
      }
    }
    this.#mode = reason === undefined ? 'helper' : 'batch';
    this.#observer?.mode?.(this.#mode, reason);
    return this.#mode;
  }

  stop(): void {
    this.#helper.stop();
  }

  async read(socket: Socket): Promise<PeerCredentials> {
    if (this.#mode === 'helper' && this.#helper.available) {
      try {
        return await this.#helper.read(socket);
      } catch (err) {
        if (socketFd(socket) === undefined || (err instanceof BrokerError && err.code === 'ERR_PEER_CLOSED')) throw err;
        this.#observer?.fellBack?.(describeError(err));
      }
    } else if (this.#mode === 'helper') {
      this.#observer?.fellBack?.('the SO_PEERCRED helper is restarting');
    }
    return this.#fallback.read(socket);
  }
}
