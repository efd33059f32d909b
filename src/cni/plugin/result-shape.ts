/**
 * The shape of a CNI result (pure): what a prevResult must look like before the plugin converts it,
 * reads its addresses and prints it back. Every problem is listed, each naming the field; values are
 * quoted short, never echoed whole.
 *
 * 0.3.0 and later (the `v03` and `v1` families):
 *   interfaces  [{ name (non-empty string), mac?, sandbox?, socketPath?, pciID? (strings), mtu? (integer >= 0) }]
 *   ips         [{ address (CIDR), gateway? (IP), interface? (integer index into interfaces),
 *                  version? ("4" | "6", matching the address; 0.3.x/0.4.0 only) }]
 *   routes      [{ dst (CIDR), gw? (IP), mtu?, advmss?, priority?, table?, scope? (integers >= 0) }]
 *   dns         { nameservers?, search?, options? (arrays of strings), domain? (string) }
 * 0.1.0 and 0.2.0 (`legacy`): ip4 / ip6 { ip (CIDR of that family), gateway? (IP), routes? (as above) }, dns.
 * Every part is optional; fields the spec does not name are left alone.
 */
import { isIP } from 'node:net';
import type { ResultFamily } from './cni-version.js';

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A value as a short quote for an error message. */
function quote(v: unknown): string {
  const text = v === undefined ? 'undefined' : JSON.stringify(v);
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/** 4 or 6 for an address in CIDR notation with a prefix length valid for its family, else 0. */
export function cidrFamily(v: unknown): 0 | 4 | 6 {
  if (typeof v !== 'string') return 0;
  const m = /^([^/]+)\/(\d{1,3})$/.exec(v);
  if (!m) return 0;
  const family = isIP(m[1]!);
  if (family !== 4 && family !== 6) return 0;
  return Number(m[2]) <= (family === 4 ? 32 : 128) ? family : 0;
}

class Problems {
  readonly list: string[] = [];
  add(path: string, what: string, value: unknown): void {
    this.list.push(`${path} ${what} (got ${quote(value)})`);
  }
}

function optionalString(p: Problems, obj: Json, key: string, path: string): void {
  if (obj[key] !== undefined && typeof obj[key] !== 'string') p.add(`${path}.${key}`, 'is not a string', obj[key]);
}

function optionalCount(p: Problems, obj: Json, key: string, path: string): void {
  const v = obj[key];
  if (v !== undefined && !(typeof v === 'number' && Number.isInteger(v) && v >= 0)) p.add(`${path}.${key}`, 'is not a non-negative integer', v);
}

function optionalIp(p: Problems, obj: Json, key: string, path: string): void {
  const v = obj[key];
  if (v !== undefined && (typeof v !== 'string' || isIP(v) === 0)) p.add(`${path}.${key}`, 'is not an IP address', v);
}

/** Each element of an optional array field, or a problem when the field is not an array. */
function eachOf(p: Problems, obj: Json, key: string, path: string, check: (item: unknown, path: string) => void): void {
  const v = obj[key];
  if (v === undefined) return;
  if (!Array.isArray(v)) {
    p.add(`${path}${key}`, 'is not an array', v);
    return;
  }
  v.forEach((item, i) => check(item, `${path}${key}[${i}]`));
}

function checkRoute(p: Problems, item: unknown, path: string): void {
  if (!isObject(item)) return p.add(path, 'is not an object', item);
  if (cidrFamily(item.dst) === 0) p.add(`${path}.dst`, 'is not an address in CIDR notation', item.dst);
  optionalIp(p, item, 'gw', path);
  for (const key of ['mtu', 'advmss', 'priority', 'table', 'scope']) optionalCount(p, item, key, path);
}

function checkDns(p: Problems, r: Json, path: string): void {
  const dns = r.dns;
  if (dns === undefined) return;
  if (!isObject(dns)) return p.add(`${path}dns`, 'is not an object', dns);
  for (const key of ['nameservers', 'search', 'options']) {
    const v = dns[key];
    if (v !== undefined && !(Array.isArray(v) && v.every((s) => typeof s === 'string'))) p.add(`${path}dns.${key}`, 'is not an array of strings', v);
  }
  optionalString(p, dns, 'domain', `${path}dns`);
}

function checkModern(p: Problems, r: Json, withVersion: boolean): void {
  const interfaces = Array.isArray(r.interfaces) ? r.interfaces.length : undefined;
  eachOf(p, r, 'interfaces', '', (item, path) => {
    if (!isObject(item)) return p.add(path, 'is not an object', item);
    if (typeof item.name !== 'string' || item.name === '') p.add(`${path}.name`, 'is not a non-empty string', item.name);
    for (const key of ['mac', 'sandbox', 'socketPath', 'pciID']) optionalString(p, item, key, path);
    optionalCount(p, item, 'mtu', path);
  });
  eachOf(p, r, 'ips', '', (item, path) => {
    if (!isObject(item)) return p.add(path, 'is not an object', item);
    const family = cidrFamily(item.address);
    if (family === 0) p.add(`${path}.address`, 'is not an address in CIDR notation', item.address);
    optionalIp(p, item, 'gateway', path);
    const index = item.interface;
    if (index !== undefined) {
      if (!(typeof index === 'number' && Number.isInteger(index) && index >= 0)) p.add(`${path}.interface`, 'is not an interface index', index);
      else if (interfaces !== undefined && index >= interfaces) p.add(`${path}.interface`, `is not an index into interfaces (${interfaces} of them)`, index);
    }
    if (withVersion && item.version !== undefined) {
      if (item.version !== '4' && item.version !== '6') p.add(`${path}.version`, 'is not "4" or "6"', item.version);
      else if (family !== 0 && item.version !== String(family)) p.add(`${path}.version`, `does not match the address (IPv${family})`, item.version);
    }
  });
  eachOf(p, r, 'routes', '', (item, path) => checkRoute(p, item, path));
  checkDns(p, r, '');
}

function checkLegacy(p: Problems, r: Json): void {
  for (const key of ['ip4', 'ip6'] as const) {
    const cfg = r[key];
    if (cfg === undefined) continue;
    if (!isObject(cfg)) {
      p.add(key, 'is not an object', cfg);
      continue;
    }
    const family = cidrFamily(cfg.ip);
    if (family === 0) p.add(`${key}.ip`, 'is not an address in CIDR notation', cfg.ip);
    else if (`ip${family}` !== key) p.add(`${key}.ip`, `is an IPv${family} address`, cfg.ip);
    optionalIp(p, cfg, 'gateway', key);
    eachOf(p, cfg, 'routes', `${key}.`, (item, path) => checkRoute(p, item, path));
  }
  checkDns(p, r, '');
}

/** Every way `result` departs from the result format of `family` (empty when it conforms). */
export function resultProblems(result: Json, family: ResultFamily): string[] {
  const p = new Problems();
  if (family === 'legacy') checkLegacy(p, result);
  else checkModern(p, result, family === 'v03');
  return p.list;
}
