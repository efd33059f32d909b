/**
 * The Istio CA front's settings (docs/operations.md, "Node broker"): where it listens, the names
 * its certificate carries, who may call it, the token audience and cache, the per-caller bounds,
 * the HTTP/2 server it runs on.
 * Read by `readBrokerConfig` when ISTIO_CA_FRONT_ADDRESS is not `off`.
 */
import type { ConfigReader } from '../core/config.js';
import type { IstioCaFrontTransport } from './fronts/istio-ca/istio-ca-front-server.js';
import { servingNameProblem } from '../pki/serving-names.js';
import { CA_TOKEN_AUDIENCE } from '../protocol/istio-ca.js';

export const ISTIO_CA_FRONT_ENV = Object.freeze({
  ADDRESS: 'ISTIO_CA_FRONT_ADDRESS',
  ALT_HOSTNAME: 'ISTIO_CA_FRONT_ALT_HOSTNAME',
  ALLOWED_ACCOUNTS: 'ISTIO_CA_FRONT_ALLOWED_ACCOUNTS',
  AUDIENCES: 'ISTIO_CA_FRONT_TOKEN_AUDIENCES',
  TOKEN_CACHE_SECONDS: 'ISTIO_CA_FRONT_TOKEN_CACHE_SECONDS',
  RATE_PER_SECOND: 'ISTIO_CA_FRONT_RATE_PER_SECOND',
  BURST: 'ISTIO_CA_FRONT_BURST',
  MAX_IN_FLIGHT: 'ISTIO_CA_FRONT_MAX_IN_FLIGHT',
  TRANSPORT: 'ISTIO_CA_FRONT_TRANSPORT',
});

export type { IstioCaFrontTransport };

export const ISTIO_CA_FRONT_DEFAULTS = Object.freeze({
  /** Where released ztunnel looks when told `CA_ADDRESS=https://localhost:15012`. */
  address: '127.0.0.1:15012',
  /** The names ztunnel dials on the node; the CA grants them by default (CA_GRANTABLE_SERVING_NAMES). */
  servingNames: Object.freeze(['localhost', '127.0.0.1']),
  allowedAccounts: Object.freeze(['istio-system/ztunnel']),
  audiences: Object.freeze([CA_TOKEN_AUDIENCE]),
  tokenCacheSeconds: 60,
  ratePerSecond: 50,
  burst: 200,
  maxInFlight: 32,
  transport: 'h2' as IstioCaFrontTransport,
});

export interface IstioCaFrontConfig {
  /** Listen address; port 0 picks one. */
  readonly host: string;
  readonly port: number;
  /** DNS/IP SANs of the front's certificate (the broker's SVID): localhost, 127.0.0.1, the alt host name. */
  readonly servingNames: readonly string[];
  /** `namespace/serviceaccount` entries that may call the front. */
  readonly allowedAccounts: readonly string[];
  /** Audiences a caller's token must be valid for (TokenReview spec.audiences). */
  readonly audiences: readonly string[];
  /** Successful reviews reused this long (never past the token's exp); 0 = review every call. */
  readonly tokenCacheSeconds: number;
  /** Per caller pod: sustained rate, burst, concurrent requests. */
  readonly ratePerSecond: number;
  readonly burst: number;
  readonly maxInFlight: number;
  /** The HTTP/2 server under the gRPC wire (default `h2`; `http2` = node:http2, as CA_TRANSPORT=http2). */
  readonly transport?: IstioCaFrontTransport;
}

/** The front's settings for a listen address already read; problems go to `r`. */
export function readIstioCaFrontSettings(r: ConfigReader, address: { readonly host: string; readonly port: number }, flags: { readonly altHostname?: string }): IstioCaFrontConfig {
  const E = ISTIO_CA_FRONT_ENV;
  const D = ISTIO_CA_FRONT_DEFAULTS;
  const alt = r.optionalString(E.ALT_HOSTNAME, flags.altHostname);
  if (alt !== undefined && servingNameProblem(alt) !== undefined) r.problem(`${E.ALT_HOSTNAME}: ${servingNameProblem(alt)}`);
  const allowedAccounts = r.accountList(E.ALLOWED_ACCOUNTS, D.allowedAccounts);
  if (allowedAccounts.length === 0) r.problem(`${E.ALLOWED_ACCOUNTS} names no account (turn the front off with ISTIO_CA_FRONT_ADDRESS=off instead)`);
  const audiences = r.list(E.AUDIENCES, D.audiences);
  if (audiences.length === 0) r.problem(`${E.AUDIENCES} names no audience`);
  return Object.freeze({
    host: address.host,
    port: address.port,
    servingNames: Object.freeze([...D.servingNames, ...(alt !== undefined && !D.servingNames.includes(alt.toLowerCase()) ? [alt.toLowerCase()] : [])]),
    allowedAccounts: Object.freeze(allowedAccounts),
    audiences: Object.freeze(audiences),
    tokenCacheSeconds: r.int(E.TOKEN_CACHE_SECONDS, D.tokenCacheSeconds, { min: 0, max: 3600 }),
    ratePerSecond: r.int(E.RATE_PER_SECOND, D.ratePerSecond, { min: 1, max: 100_000 }),
    burst: r.int(E.BURST, D.burst, { min: 1, max: 100_000 }),
    maxInFlight: r.int(E.MAX_IN_FLIGHT, D.maxInFlight, { min: 1, max: 10_000 }),
    transport: r.oneOf(E.TRANSPORT, ['h2', 'http2'] as const, D.transport),
  });
}
