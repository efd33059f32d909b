/**
 * The broker's own CA token, as a part of the broker: the fetchers its config names (the
 * kubelet-projected file alone, or TokenRequest bound to its own pod with the file, if any, as
 * fallback) behind a `TokenSource`, whose refresh loop runs from `start(signal)` until `stop()`.
 */
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/log.js';
import type { Rng } from '../core/rng.js';
import { projectedTokenFileFetcher, tokenRequestFetcher } from './adapters/token-fetchers.js';
import { TokenSource, type TokenFetcher } from './adapters/token-source.js';
import type { BrokerConfig } from './config.js';
import { BrokerError } from './errors.js';

/** The broker's own token: the projected file alone, or TokenRequest with the projected file (if any) as fallback. */
export function ownTokenFetchers(config: BrokerConfig): { primary: TokenFetcher; fallback?: TokenFetcher } {
  const file = config.tokenFile ? projectedTokenFileFetcher(config.tokenFile) : undefined;
  if (config.tokenSource === 'file') {
    if (!file) throw new BrokerError('ERR_TOKEN_UNAVAILABLE', "tokenSource 'file' needs tokenFile", { status: 'invalid-argument' });
    return { primary: file };
  }
  const primary = tokenRequestFetcher(config.kubeConfig, {
    pod: config.pod,
    audience: config.ca.audience,
    expirationSeconds: config.tokenExpirationSeconds,
  });
  return file ? { primary, fallback: file } : { primary };
}

export class OwnToken {
  readonly source: TokenSource;
  readonly #stopping = new AbortController();
  #loop: Promise<void> | undefined;

  constructor(
    config: BrokerConfig,
    deps: { readonly clock: Clock; readonly rng: Rng; readonly logger: Logger; readonly onFetch?: (outcome: 'ok' | 'error') => void },
  ) {
    this.source = new TokenSource({ ...ownTokenFetchers(config), ...deps });
  }

  /** Starts the refresh loop; it ends when `signal` aborts or at `stop()`. */
  start(signal?: AbortSignal): void {
    if (this.#loop) return;
    signal?.addEventListener('abort', () => this.#stopping.abort(), { once: true });
    this.#loop = this.source.run(this.#stopping.signal);
  }

  /** The readiness answer: undefined while a valid token is held. */
  problem(): string | undefined {
    const { source } = this;
    return source.ready ? undefined : `no valid token${source.lastError ? `: ${source.lastError}` : ''}`;
  }

  /** Ends the loop (callers waiting for a token are rejected) and waits for it. */
  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#loop?.catch(() => undefined);
  }
}
