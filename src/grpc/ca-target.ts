/**
 * Where a client finds the CA's replicas, from one setting (the broker's CA_ADDRESS):
 *
 *   name:port, dns:///name:port   a DNS name; every address it resolves to is an endpoint (a
 *                                 headless Service answers with one A/AAAA record per ready pod)
 *   ip:port, [v6]:port            one endpoint
 *   ip:port,ip:port,...           a fixed list of addresses (one IP family)
 *   ipv4:ip:port,...  ipv6:...    the same list in grpc-js' own target syntax
 *
 * `target` is what grpc-js gets (its `dns`, `ipv4` and `ipv6` resolvers); calls go round robin
 * over every endpoint that is connected (caServiceConfig). Pure: no sockets, no DNS.
 */
import { isIP } from 'node:net';
import { CA_SERVICE } from '../protocol/istio-ca.js';

export interface CaEndpoint {
  readonly host: string;
  readonly port: number;
}

export interface CaTarget {
  /** The grpc-js target. */
  readonly target: string;
  /** A DNS name (resolved by the client), or a fixed list of IP endpoints. */
  readonly kind: 'dns' | 'static';
  /** The endpoints of a fixed list; the name and port of a DNS target. */
  readonly endpoints: readonly CaEndpoint[];
}

const HOST_PORT = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]/,\s]+)):(\d{1,5})$/u;

function hostPort(entry: string): CaEndpoint | string {
  const m = HOST_PORT.exec(entry);
  if (!m) return `${JSON.stringify(entry)} is not host:port`;
  const port = Number(m[3]);
  if (port < 1 || port > 65_535) return `${JSON.stringify(entry)}: port ${m[3]} is not 1-65535`;
  const host = m[1] ?? m[2]!;
  if (m[1] !== undefined && isIP(host) !== 6) return `${JSON.stringify(entry)}: ${host} is not an IPv6 address`;
  return { host, port };
}

const format = (e: CaEndpoint): string => (isIP(e.host) === 6 ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`);

/** The CA target for `raw`, or the problem with it (one sentence naming the setting's value). */
export function parseCaTarget(raw: string): CaTarget | { readonly problem: string } {
  const value = raw.trim();
  const scheme = /^(ipv4|ipv6):(?!\/)/u.exec(value)?.[1];
  const listText = scheme ? value.slice(scheme.length + 1) : value.replace(/^dns:(\/\/[^/]*\/)?/u, '');
  const entries = listText.split(',').map((e) => e.trim());
  if (entries.some((e) => e === '')) return { problem: `${JSON.stringify(raw)} has an empty address` };
  const parsed: CaEndpoint[] = [];
  const problems: string[] = [];
  for (const e of entries) {
    const hp = hostPort(e);
    if (typeof hp === 'string') problems.push(hp);
    else parsed.push(hp);
  }
  if (problems.length > 0) return { problem: problems.join('; ') };
  const families = new Set(parsed.map((e) => isIP(e.host)));
  if (!scheme && parsed.length === 1 && families.has(0)) {
    const only = parsed[0]!;
    return { target: `dns:///${format(only)}`, kind: 'dns', endpoints: [only] };
  }
  if (families.has(0)) return { problem: `${JSON.stringify(raw)}: a list holds IP addresses only (for names, use one DNS name that resolves to every replica, e.g. a headless Service)` };
  if (families.size > 1) return { problem: `${JSON.stringify(raw)} mixes IPv4 and IPv6 addresses` };
  const family = families.has(6) ? 'ipv6' : 'ipv4';
  if (scheme && scheme !== family) return { problem: `${JSON.stringify(raw)}: ${scheme}: lists ${family === 'ipv6' ? 'IPv6' : 'IPv4'} addresses` };
  const seen = new Set<string>();
  for (const e of parsed) {
    if (seen.has(format(e))) return { problem: `${JSON.stringify(raw)} lists ${format(e)} twice` };
    seen.add(format(e));
  }
  if (parsed.length === 1 && !scheme) return { target: format(parsed[0]!), kind: 'static', endpoints: parsed };
  return { target: `${family}:${parsed.map(format).join(',')}`, kind: 'static', endpoints: parsed };
}

/**
 * The grpc-js service config of a CA channel to `target`: round robin over every connected
 * endpoint; with several endpoints (a list, or a DNS name, which may resolve to several), a
 * CreateCertificate that failed UNAVAILABLE (its endpoint died or refused the connection) is tried
 * again on another, up to 3 attempts in all. CreateCertificate is safe to repeat: a second answer
 * is another certificate for the same key. One IP endpoint gets no retry (it would be the same one).
 */
export function caServiceConfig(target: CaTarget | undefined): string {
  const several = target !== undefined && (target.kind === 'dns' || target.endpoints.length > 1);
  return JSON.stringify({
    loadBalancingConfig: [{ round_robin: {} }],
    ...(several
      ? {
          methodConfig: [
            {
              name: [{ service: CA_SERVICE }],
              retryPolicy: { maxAttempts: 3, initialBackoff: '0.05s', maxBackoff: '0.5s', backoffMultiplier: 2, retryableStatusCodes: ['UNAVAILABLE'] },
            },
          ],
        }
      : {}),
  });
}

/** How often a DNS target may be resolved again (after an endpoint failed): 5 s instead of grpc-js' 30 s. */
export const CA_DNS_MIN_RERESOLVE_MS = 5_000;
