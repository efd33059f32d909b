/**
 * OIDC discovery for a Kubernetes service-account issuer: fetch
 * `<issuer>/.well-known/openid-configuration`, check its `issuer`, and build jose's remote JWKS
 * from `jwks_uri`. The HTTPS fetch trusts a given CA bundle and may send a bearer token (the
 * apiserver serves discovery to authenticated callers unless anonymous access is granted).
 * Discovery runs lazily on the first verification and is retried after a failure.
 *
 * The bearer token is the CA's own Kubernetes credential: it goes only to one origin (the
 * Kubernetes API server's), never to a `jwks_uri` or issuer elsewhere, which would otherwise
 * receive a token that acts as the CA against the cluster.
 */
import { request } from 'node:https';
import { createRemoteJWKSet, customFetch, type FetchImplementation, type JWTVerifyGetKey } from 'jose';
import type { Secret } from '../../core/secret.js';
import { authnError } from '../errors.js';

export interface OidcDiscoveryOptions {
  readonly issuer: string;
  /**
   * Where to fetch `/.well-known/openid-configuration` when the issuer URL itself is not
   * reachable from the CA (default: the issuer). The document's `issuer` must still match.
   */
  readonly discoveryUrl?: string;
  /** Skip discovery and use this JWKS URL directly. */
  readonly jwksUri?: string;
  /** PEM roots for the HTTPS fetches; default: Node's built-in roots. */
  readonly caPem?: string;
  readonly bearerToken?: () => Secret<string> | undefined;
  /**
   * The only origin (`https://host[:port]`) that receives `bearerToken`: the Kubernetes API
   * server's. Default: the origin the first document is fetched from (`jwksUri` when discovery
   * is skipped, else `discoveryUrl`, else the issuer) — so a `jwks_uri` on another host never
   * sees the token.
   */
  readonly bearerTokenOrigin?: string;
  readonly timeoutMs?: number;
}

/** `new URL(url).origin`, or undefined when `url` is not an absolute URL. */
export function originOf(url: string): string | undefined {
  try {
    const origin = new URL(url).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** Where discovery (or, without discovery, the JWKS) is first fetched from. */
export function oidcFetchOrigin(o: { readonly issuer: string; readonly discoveryUrl?: string; readonly jwksUri?: string }): string | undefined {
  return originOf(o.jwksUri ?? o.discoveryUrl ?? o.issuer);
}

/**
 * Whether the CA may send its Kubernetes credentials on OIDC fetches at all: only when those
 * fetches start at the API server (`apiServerUrl`, the kubeconfig's cluster server).
 */
export function kubeCredentialsAllowedForOidc(o: { readonly apiServerUrl: string | undefined; readonly issuer: string; readonly discoveryUrl?: string; readonly jwksUri?: string }): boolean {
  const api = o.apiServerUrl === undefined ? undefined : originOf(o.apiServerUrl);
  return api !== undefined && api === oidcFetchOrigin(o);
}

/**
 * A fetch over node:https with our own trust roots (jose calls it for the JWKS). The bearer
 * token is added only to requests whose origin equals `bearerTokenOrigin` (none without it).
 */
export function httpsFetch(options: Pick<OidcDiscoveryOptions, 'caPem' | 'bearerToken' | 'bearerTokenOrigin' | 'timeoutMs'>): FetchImplementation {
  return (url, init) =>
    new Promise<Response>((resolve, reject) => {
      const headers: Record<string, string> = { accept: 'application/json' };
      init.headers.forEach((v, k) => (headers[k] = v));
      const token = options.bearerTokenOrigin !== undefined && originOf(url) === options.bearerTokenOrigin ? options.bearerToken?.() : undefined;
      if (token) headers.authorization = `Bearer ${token.reveal()}`;
      const req = request(
        url,
        { method: 'GET', headers, ...(options.caPem ? { ca: options.caPem } : {}), signal: init.signal, timeout: options.timeoutMs ?? 5000 },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > 1 << 20) req.destroy(new Error('response too large'));
            else chunks.push(c);
          });
          res.on('end', () => resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 500 })));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error('request timed out')));
      req.on('error', reject);
      req.end();
    });
}

/** A JWTVerifyGetKey that discovers the JWKS on first use. */
export function discoveredJwks(options: OidcDiscoveryOptions): JWTVerifyGetKey {
  const bearerTokenOrigin = options.bearerTokenOrigin ?? oidcFetchOrigin(options);
  const fetchImpl = httpsFetch({ ...options, ...(bearerTokenOrigin !== undefined ? { bearerTokenOrigin } : {}) });
  let keys: Promise<JWTVerifyGetKey> | undefined;
  const resolveKeys = async (): Promise<JWTVerifyGetKey> => {
    const jwksUri = options.jwksUri ?? (await discoverJwksUri(options.issuer, options.discoveryUrl ?? options.issuer, fetchImpl, options.timeoutMs ?? 5000));
    return createRemoteJWKSet(new URL(jwksUri), { [customFetch]: fetchImpl, timeoutDuration: options.timeoutMs ?? 5000 });
  };
  return async (header, token) => {
    keys ??= resolveKeys().catch((err: unknown) => {
      keys = undefined;
      throw authnError('ERR_CA_AUTHN_BACKEND', 'OIDC discovery failed', err);
    });
    const getKey = await keys;
    return getKey(header, token);
  };
}

async function discoverJwksUri(issuer: string, base: string, fetchImpl: FetchImplementation, timeoutMs: number): Promise<string> {
  const url = `${base.replace(/\/$/, '')}/.well-known/openid-configuration`;
  const res = await fetchImpl(url, { headers: new Headers(), method: 'GET', redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
  if (res.status !== 200) throw new Error(`OIDC discovery ${url} answered HTTP ${res.status}`);
  const doc = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
  if (doc.issuer !== issuer) throw new Error(`OIDC discovery issuer ${String(doc.issuer)} does not match ${issuer}`);
  if (typeof doc.jwks_uri !== 'string') throw new Error('OIDC discovery document has no jwks_uri');
  return doc.jwks_uri;
}
