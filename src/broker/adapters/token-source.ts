/**
 * The broker's own token for the CA: obtained from a primary fetcher (TokenRequest for the
 * broker's service account, bound to its own pod), refreshed at ~80 % of its lifetime with
 * jitter, retried with backoff; the current token keeps being used until it expires when a
 * refresh fails. A fallback fetcher (the projected service-account token file) is used when
 * the primary fails and no valid token is held.
 *
 * Plain TypeScript over an injected clock and rng; the Kubernetes and file adapters live in
 * `token-fetchers.ts`.
 */
import type { Clock } from '../../core/clock.js';
import { describeError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';
import { jitter, type Rng } from '../../core/rng.js';
import type { Secret } from '../../core/secret.js';
import type { TokenProvider } from './ca-client.js';
import { BrokerError, isAbortError } from '../errors.js';
import { backoff, DEFAULT_REFRESH_POLICY } from '../cache/refresh-policy.js';
import { Waiters } from '../cache/waiters.js';

export interface FetchedToken {
  readonly token: Secret<string>;
  /** ms since epoch. */
  readonly expiresAt: number;
  /** Where it came from, for logs and metrics ("token-request", "file"). */
  readonly source: string;
}

export type TokenFetcher = (signal: AbortSignal) => Promise<FetchedToken>;

export interface TokenSourceOptions {
  readonly primary: TokenFetcher;
  readonly fallback?: TokenFetcher;
  readonly clock: Clock;
  readonly rng: Rng;
  readonly logger: Logger;
  /** Fraction of the lifetime after which to refresh. Default 0.8. */
  readonly refreshFraction?: number;
  /** Spread of the refresh delay. Default 0.1 (±10 %). */
  readonly refreshJitter?: number;
  /** Told the outcome of every fetch attempt (metrics). */
  readonly onFetch?: (outcome: 'ok' | 'error') => void;
}

/** Delay until refreshing a token obtained at `now` that expires at `expiresAt`. */
export function tokenRefreshDelay(options: { now: number; expiresAt: number; fraction: number; spread: number; rng: Rng }): number {
  const lifetime = Math.max(0, options.expiresAt - options.now);
  return jitter(lifetime * options.fraction, options.spread, options.rng);
}

export class TokenSource implements TokenProvider {
  readonly #o: TokenSourceOptions;
  #current: FetchedToken | undefined;
  readonly #waiters = new Waiters<Secret<string>>();
  #lastError: unknown;

  constructor(options: TokenSourceOptions) {
    this.#o = options;
  }

  /** A token is held and not expired. */
  get ready(): boolean {
    return this.#current !== undefined && this.#o.clock.now() < this.#current.expiresAt;
  }

  get expiresAt(): number | undefined {
    return this.#current?.expiresAt;
  }

  get lastError(): string | undefined {
    return this.#lastError === undefined ? undefined : describeError(this.#lastError);
  }

  /** The current token; waits for the first one (or a replacement for an expired one). */
  token(signal?: AbortSignal): Promise<Secret<string>> {
    if (this.ready) return Promise.resolve(this.#current!.token);
    return this.#waiters.wait(signal);
  }

  /** Runs the fetch/refresh loop until `signal` aborts. Resolves when stopped. */
  async run(signal: AbortSignal): Promise<void> {
    const { clock, rng, logger } = this.#o;
    let attempt = 0;
    while (!signal.aborted) {
      let delay: number;
      try {
        const fetched = await this.#fetch(signal);
        this.#set(fetched);
        attempt = 0;
        delay = tokenRefreshDelay({
          now: clock.now(),
          expiresAt: fetched.expiresAt,
          fraction: this.#o.refreshFraction ?? 0.8,
          spread: this.#o.refreshJitter ?? 0.1,
          rng,
        });
        logger.info('broker token obtained', {
          source: fetched.source,
          expiresAt: new Date(fetched.expiresAt).toISOString(),
          refreshInMs: Math.round(delay),
        });
      } catch (err) {
        if (signal.aborted) break;
        this.#o.onFetch?.('error');
        this.#lastError = err;
        delay = backoff(attempt++, rng, DEFAULT_REFRESH_POLICY);
        logger.warn('broker token refresh failed; keeping the current token while it is valid', {
          err: describeError(err),
          retryInMs: Math.round(delay),
          currentValid: this.ready,
        });
        if (!this.ready) this.#failWaiters(err);
      }
      try {
        await clock.sleep(delay, signal);
      } catch (err) {
        if (!isAbortError(err) && !signal.aborted) throw err;
      }
    }
    this.#failWaiters(new BrokerError('ERR_SHUTTING_DOWN', 'token source stopped', { status: 'unavailable' }));
  }

  async #fetch(signal: AbortSignal): Promise<FetchedToken> {
    const now = this.#o.clock.now();
    try {
      const t = await this.#o.primary(signal);
      if (t.expiresAt <= now) throw new Error('token request returned an already expired token');
      return t;
    } catch (err) {
      if (signal.aborted || !this.#o.fallback || this.ready) throw err;
      this.#o.logger.warn('token request failed, trying the projected token file', { err: describeError(err) });
      const t = await this.#o.fallback(signal);
      if (t.expiresAt <= this.#o.clock.now()) throw new Error('projected token file holds an expired token', { cause: err });
      return t;
    }
  }

  #set(t: FetchedToken): void {
    this.#current = t;
    this.#o.onFetch?.('ok');
    this.#lastError = undefined;
    this.#waiters.resolveAll(t.token);
  }

  #failWaiters(err: unknown): void {
    const e =
      err instanceof BrokerError
        ? err
        : new BrokerError('ERR_TOKEN_UNAVAILABLE', `no token for the CA: ${describeError(err)}`, { status: 'unavailable', cause: err });
    this.#waiters.rejectAll(e);
  }
}
