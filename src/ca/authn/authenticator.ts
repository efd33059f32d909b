/**
 * Authenticators turn a bearer token into a `Caller` or throw a CaError with status
 * unauthenticated. `AuthenticatorChain` tries them in order; the first success wins, and when
 * all fail the first one's error is kept (the others are logged at debug).
 */
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

  async authenticate(token: Secret<string>): Promise<Caller> {
    let first: unknown;
    for (const a of this.#authenticators) {
      try {
        return await a.authenticate(token);
      } catch (err) {
        this.#logger.debug('authenticator rejected token', { authenticator: a.kind, err });
        first ??= err;
      }
    }
    if (first instanceof CaError) throw first;
    throw authnError('ERR_CA_AUTHN_BACKEND', 'no authenticator accepted the token', first);
  }
}

/**
 * Reads `exp` (seconds) from a JWT's payload without verifying it — only to bound caching of a
 * result that a verifier already vouched for. Undefined when the token is not a readable JWT.
 */
export function unverifiedJwtExpiryMs(token: string): number | undefined {
  const parts = token.split('.');
  if (parts.length !== 3 || parts[1] === undefined) return undefined;
  try {
    const payload = JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')) as { exp?: unknown };
    return typeof payload.exp === 'number' && Number.isFinite(payload.exp) ? payload.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}
