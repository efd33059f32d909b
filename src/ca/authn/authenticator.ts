/**
 * Authenticators turn a bearer token into a `Caller` or throw a CaError with status
 * unauthenticated. `AuthenticatorChain` tries them in order; the first success wins. Each
 * refuses a token that is not a JWT at all (ERR_CA_TOKEN_MALFORMED, `token-shape.ts`) before it
 * costs anything but a local parse.
 *
 * A definite "no" ends the chain: only an authenticator that could not decide (its backend
 * failed or is unreachable, `ERR_CA_AUTHN_BACKEND`) hands the token to the next one. Otherwise
 * a token that TokenReview rejected (its bound pod or service account is gone) would still pass
 * local JWT verification, which cannot see either.
 */
import { decodeJwt } from 'jose';
import { ConfigError } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import type { Secret } from '../../core/secret.js';
import type { Caller } from '../caller.js';
import { CaError, authnError } from '../errors.js';

export interface Authenticator {
  readonly kind: Caller['authenticator'];
  authenticate(token: Secret<string>): Promise<Caller>;
}

export class AuthenticatorChain {
  readonly #authenticators: readonly Authenticator[];
  readonly #logger: Logger;

  constructor(authenticators: readonly Authenticator[], logger: Logger) {
    this.#authenticators = authenticators;
    this.#logger = logger;
  }

  /** The rejection handler of the one-authenticator path (made once, not per call). */
  readonly #onlyFailed = (err: unknown): never => {
    throw this.#failure(this.#authenticators[0]!, err);
  };

  authenticate(token: Secret<string>): Promise<Caller> {
    // One authenticator (a cluster with TokenReview or JWT alone, the usual case): its promise
    // with the same failure rule, without the loop's async frame per call.
    if (this.#authenticators.length === 1) {
      try {
        return this.#authenticators[0]!.authenticate(token).then(undefined, this.#onlyFailed);
      } catch (err) {
        return Promise.reject(this.#failure(this.#authenticators[0]!, err));
      }
    }
    return this.#chain(token);
  }

  async #chain(token: Secret<string>): Promise<Caller> {
    let undecided: unknown;
    for (const a of this.#authenticators) {
      try {
        return await a.authenticate(token);
      } catch (err) {
        if (!(err instanceof CaError)) throw unexpected(a, err);
        if (!couldNotDecide(err)) throw err;
        this.#undecided(a, err);
        undecided ??= err;
      }
    }
    if (undecided instanceof CaError) throw undecided;
    throw authnError('ERR_CA_AUTHN_BACKEND', 'no authenticator could decide', undecided);
  }

  /** The single authenticator's failure, as the loop would end with it. */
  #failure(a: Authenticator, err: unknown): CaError {
    if (!(err instanceof CaError)) return unexpected(a, err);
    if (couldNotDecide(err)) this.#undecided(a, err);
    return err;
  }

  #undecided(a: Authenticator, err: CaError): void {
    this.#logger.debug('authenticator could not decide, trying the next', { authenticator: a.kind, err });
  }
}

/** An unexpected exception is not a verdict: no fall-through (and no refusal cached), UNAVAILABLE. */
function unexpected(a: Authenticator, err: unknown): CaError {
  return authnError('ERR_CA_AUTHN_BACKEND', `${a.kind} authenticator failed`, err);
}

/** True when the authenticator failed to reach a verdict (backend error), not when it said no. */
function couldNotDecide(err: unknown): boolean {
  return err instanceof CaError && err.code === 'ERR_CA_AUTHN_BACKEND';
}

/**
 * Reads `exp` (seconds) from a JWT's payload without verifying it — only to bound caching of a
 * result that a verifier already vouched for. Undefined when the token is not a readable JWT.
 */
export function unverifiedJwtExpiryMs(token: string): number | undefined {
  try {
    const { exp } = decodeJwt(token);
    return typeof exp === 'number' && Number.isFinite(exp) ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Refuses an empty audience list at construction (ERR_CONFIG_INVALID): with no audience of our
 * own, a token issued for any other audience (the apiserver's) must never pass for one of ours.
 */
export function requireAudiences(audiences: readonly string[], who: string): void {
  if (audiences.length === 0 || audiences.some((a) => a.trim() === '')) {
    throw new ConfigError([`${who}: audiences ${JSON.stringify(audiences)} must name at least one non-empty audience`]);
  }
}
