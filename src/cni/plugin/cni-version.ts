/**
 * CNI spec versions and result conversion between them (pure).
 *
 * Result formats by version family:
 *  - 0.1.0, 0.2.0: `{ ip4: {ip, gateway, routes}, ip6: {...}, dns }`
 *  - 0.3.0, 0.3.1, 0.4.0: `{ interfaces, ips: [{version, address, gateway, interface}], routes, dns }`
 *  - 1.0.0, 1.1.0: as 0.3.x without `ips[].version`
 * A prevResult in the request's own version passes through unchanged; one in another supported
 * version is converted to the request's version; one in an unknown version is refused (code 1),
 * and one that does not have its version's result shape (`result-shape.ts`) is refused with code 6.
 */
import { CniError } from './cni-error.js';
import { resultProblems } from './result-shape.js';

export const SUPPORTED_VERSIONS: readonly string[] = Object.freeze([
  '0.1.0',
  '0.2.0',
  '0.3.0',
  '0.3.1',
  '0.4.0',
  '1.0.0',
  '1.1.0',
]);

export const CURRENT_VERSION = '1.1.0';

/** The version assumed when a config has no `cniVersion` (as libcni does). */
export const DEFAULT_CONFIG_VERSION = '0.1.0';

export type ResultFamily = 'legacy' | 'v03' | 'v1';

export function isSupportedVersion(v: string): boolean {
  return SUPPORTED_VERSIONS.includes(v);
}

function parts(v: string): [number, number, number] {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(v);
  if (!m) throw new CniError('ERR_CNI_INCOMPATIBLE_VERSION', `invalid version ${JSON.stringify(v)}`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** a >= b for semantic versions "x.y.z". */
export function versionAtLeast(a: string, b: string): boolean {
  const pa = parts(a);
  const pb = parts(b);
  for (let i = 0; i < 3; i++) {
    if (pa[i]! !== pb[i]!) return pa[i]! > pb[i]!;
  }
  return true;
}

export function resultFamily(version: string): ResultFamily {
  if (versionAtLeast(version, '1.0.0')) return 'v1';
  if (versionAtLeast(version, '0.3.0')) return 'v03';
  return 'legacy';
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function isV6(address: unknown): boolean {
  return typeof address === 'string' && address.includes(':');
}

function asArray(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** A legacy (0.1/0.2) result as the common 0.3+/1.x shape (ips carry no version yet). */
function legacyToModern(r: Json): Json {
  const ips: Json[] = [];
  const routes: unknown[] = [];
  for (const key of ['ip4', 'ip6'] as const) {
    const cfg = r[key];
    if (!isObject(cfg)) continue;
    const ip: Json = { address: cfg.ip };
    if (cfg.gateway !== undefined) ip.gateway = cfg.gateway;
    ips.push(ip);
    routes.push(...asArray(cfg.routes));
  }
  const out: Json = { ips };
  if (routes.length > 0) out.routes = routes;
  if (r.dns !== undefined) out.dns = r.dns;
  return out;
}

/** The common shape as a legacy result: the first address of each family, its routes. */
function modernToLegacy(r: Json): Json {
  const out: Json = {};
  const routes = asArray(r.routes).filter(isObject);
  for (const ip of asArray(r.ips).filter(isObject)) {
    const key = isV6(ip.address) ? 'ip6' : 'ip4';
    if (out[key] !== undefined) continue;
    const cfg: Json = { ip: ip.address };
    if (ip.gateway !== undefined) cfg.gateway = ip.gateway;
    const own = routes.filter((rt) => isV6(rt.dst) === (key === 'ip6'));
    if (own.length > 0) cfg.routes = own;
    out[key] = cfg;
  }
  if (r.dns !== undefined) out.dns = r.dns;
  return out;
}

/**
 * prevResult expressed in `target` version. `prevResult.cniVersion`, when present, names its
 * version; when absent it is taken to be `target` already (what the spec asks runtimes to send).
 */
export function convertResult(prevResult: unknown, target: string): Json {
  if (!isObject(prevResult)) {
    throw new CniError('ERR_CNI_DECODE', 'prevResult is not a JSON object');
  }
  const declared = prevResult.cniVersion;
  if (declared !== undefined && typeof declared !== 'string') {
    throw new CniError('ERR_CNI_DECODE', 'prevResult.cniVersion is not a string');
  }
  const source = declared ?? target;
  if (!isSupportedVersion(source)) {
    throw new CniError('ERR_CNI_INCOMPATIBLE_VERSION', `prevResult has unsupported cniVersion ${JSON.stringify(source)}`, {
      details: `supported versions: ${SUPPORTED_VERSIONS.join(', ')}`,
    });
  }
  const problems = resultProblems(prevResult, resultFamily(source));
  if (problems.length > 0) {
    const more = problems.length > 1 ? ` (and ${problems.length - 1} more problems, see details)` : '';
    throw new CniError('ERR_CNI_DECODE', `prevResult is not a valid CNI ${source} result: ${problems[0]}${more}`, {
      details: problems.join('; '),
    });
  }
  if (source === target) return { ...prevResult, cniVersion: target };
  const from = resultFamily(source);
  const to = resultFamily(target);
  const { cniVersion: _dropped, ...body } = prevResult;
  void _dropped;
  if (from === to) return { cniVersion: target, ...body };
  const modern = from === 'legacy' ? legacyToModern(body) : body;
  if (to === 'legacy') return { cniVersion: target, ...modernToLegacy(modern) };
  const ips = asArray(modern.ips).map((ip) => {
    if (!isObject(ip)) return ip;
    const { version: _v, ...rest } = ip;
    void _v;
    return to === 'v03' ? { ...rest, version: isV6(ip.address) ? '6' : '4' } : rest;
  });
  return { cniVersion: target, ...modern, ips };
}

/** IP addresses (CIDR notation) in a result of any family. */
export function resultAddresses(result: Json): Array<{ address: string; gateway?: string; interface?: number }> {
  const out: Array<{ address: string; gateway?: string; interface?: number }> = [];
  if (Array.isArray(result.ips)) {
    for (const ip of result.ips) {
      if (!isObject(ip) || typeof ip.address !== 'string') continue;
      out.push({
        address: ip.address,
        ...(typeof ip.gateway === 'string' ? { gateway: ip.gateway } : {}),
        ...(typeof ip.interface === 'number' ? { interface: ip.interface } : {}),
      });
    }
    return out;
  }
  for (const key of ['ip4', 'ip6']) {
    const cfg = result[key];
    if (isObject(cfg) && typeof cfg.ip === 'string') {
      out.push({ address: cfg.ip, ...(typeof cfg.gateway === 'string' ? { gateway: cfg.gateway } : {}) });
    }
  }
  return out;
}
