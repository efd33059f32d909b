/**
 * Serving names on a leaf: a node agent (the certbroker node broker) may ask for its own SVID
 * with extra DNS/IP SANs, so the same certificate can serve TLS on the node to a client that
 * dials `localhost:15012` (released ztunnel through the broker's Istio CA front) and verifies
 * the name. Istio's CreateCertificate has no such field; the request carries them in its
 * metadata Struct under `SERVING_NAMES_KEY` (src/protocol/istio-ca.ts) as one comma-separated
 * string. The leaf keeps exactly one URI SAN (the caller's own identity), so it stays an
 * X509-SVID.
 *
 * Granted only when every check passes, else refused as an authorization failure (the generic
 * UNAUTHENTICATED, precise code in log and metric): the request is for the caller's own
 * identity (no ImpersonatedIdentity); the caller is a trusted node agent whose token is bound
 * to its own, existing pod (the node authorizer's caller checks); every name is on the CA's
 * allow-list (`CA_GRANTABLE_SERVING_NAMES`, default loopback only). A value that is not a list
 * of host names / IP literals is INVALID_ARGUMENT. Pure.
 */
import { canonicalServingName, MAX_SERVING_NAMES, servingNameProblem } from '../pki/serving-names.js';
import { IMPERSONATED_IDENTITY_KEY } from '../protocol/istio-ca.js';
import type { Caller } from './caller.js';
import { CaError, authzError } from './errors.js';
import type { NodeAuthorizer } from './node-authorizer.js';

/** What the CA grants by default: names that only reach the node itself. */
export const DEFAULT_GRANTABLE_SERVING_NAMES: readonly string[] = Object.freeze(['localhost', '127.0.0.1', '::1']);

/** Splits and checks the metadata value; throws ERR_CA_METADATA_INVALID (invalid-argument). */
export function parseServingNames(value: string, key: string): string[] {
  const names = [...new Set(value.split(',').map((n) => n.trim()).filter((n) => n !== ''))];
  const invalid = (why: string) => new CaError('ERR_CA_METADATA_INVALID', `${key}: ${why}`, { status: 'invalid-argument', publicMessage: `${key}: ${why}` });
  if (names.length > MAX_SERVING_NAMES) throw invalid(`${names.length} names, at most ${MAX_SERVING_NAMES}`);
  for (const n of names) {
    const problem = servingNameProblem(n);
    if (problem !== undefined) throw invalid(problem);
  }
  return names;
}

export class ServingNamesPolicy {
  readonly #allowed: ReadonlySet<string>;

  /** `allowList`: names (DNS or IP, any spelling) the CA may put on a node agent's leaf. */
  constructor(allowList: readonly string[]) {
    this.#allowed = new Set(allowList.map(canonicalServingName));
  }

  /**
   * Returns `names` when `caller` may have them on its own SVID; throws an authz CaError
   * otherwise. `impersonated` is the request's ImpersonatedIdentity (serving names are for the
   * caller's own identity only).
   */
  authorize(caller: Caller, names: readonly string[], context: { readonly impersonated: string | undefined; readonly authorizer: NodeAuthorizer }): readonly string[] {
    if (context.impersonated !== undefined && context.impersonated !== '') {
      throw authzError('ERR_CA_SERVING_NAMES_IMPERSONATED', `serving names are granted only on the caller's own identity, not with ${IMPERSONATED_IDENTITY_KEY}`);
    }
    context.authorizer.authorizeNodeAgent(caller);
    const refused = names.filter((n) => !this.#allowed.has(canonicalServingName(n)));
    if (refused.length > 0) {
      throw authzError('ERR_CA_SERVING_NAME_NOT_ALLOWED', `serving names ${JSON.stringify(refused)} are not on the CA's allow-list`);
    }
    return names;
  }
}
