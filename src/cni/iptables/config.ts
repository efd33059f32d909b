/**
 * istio-iptables configuration: `IptablesSettings` is what callers hand in, using Istio's
 * option names and Istio's loose forms (comma-separated strings, ports as strings, "" for
 * unset); `resolveIptablesConfig` validates it and returns the typed, frozen `IptablesConfig`
 * the rule builder works from. Every problem is reported at once in one `ConfigError`.
 * Pure: no environment, no files (the CLI reads env vars and resolv.conf and passes values in).
 */
import { ConfigError } from '../../core/config.js';
import { parseCidr, ipFamily, type Cidr } from './addresses.js';

/** A comma-separated string (Istio's form) or a list. */
export type ListLike = string | readonly (string | number)[];

export type InterceptionMode = 'REDIRECT' | 'TPROXY';

export interface IptablesSettings {
  readonly proxyPort?: string | number;
  readonly inboundCapturePort?: string | number;
  readonly inboundTunnelPort?: string | number;
  /** UIDs (or user names) whose traffic is never redirected; default 1337. */
  readonly proxyUID?: ListLike;
  /** GIDs (or group names); default: the same values as proxyUID. */
  readonly proxyGID?: ListLike;
  /** "REDIRECT" (default; "" means default) or "TPROXY". */
  readonly inboundInterceptionMode?: string;
  readonly inboundTProxyMark?: string | number;
  readonly inboundTProxyRouteTable?: string | number;
  /** "*" for all ports, a port list, or "" for no inbound capture. */
  readonly inboundPortsInclude?: ListLike;
  /** Only used when inboundPortsInclude is "*". */
  readonly inboundPortsExclude?: ListLike;
  /** "*" for all, a CIDR list, or "" for no outbound capture by destination. */
  readonly outboundIPRangesInclude?: ListLike;
  readonly outboundIPRangesExclude?: ListLike;
  readonly outboundPortsInclude?: ListLike;
  readonly outboundPortsExclude?: ListLike;
  /** Groups whose outbound traffic is captured; "*" (default) for all. */
  readonly ownerGroupsInclude?: ListLike;
  /** Only used when ownerGroupsInclude is "*". */
  readonly ownerGroupsExclude?: ListLike;
  readonly rerouteVirtualInterfaces?: ListLike;
  readonly excludeInterfaces?: ListLike;
  readonly redirectDNS?: boolean;
  readonly captureAllDNS?: boolean;
  /** Nameservers (from resolv.conf) whose DNS traffic is captured when captureAllDNS is off. */
  readonly dnsServersV4?: readonly string[];
  readonly dnsServersV6?: readonly string[];
  readonly dropInvalid?: boolean;
  readonly enableIPv6?: boolean;
  /** Default 127.0.0.1/32 (Istio's ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR). */
  readonly hostIPv4LoopbackCidr?: string;
}

/** Owner-group capture: everyone except `groups`, or only `groups`. */
export type OwnerGroupFilter =
  | { readonly mode: 'all-except'; readonly groups: readonly string[] }
  | { readonly mode: 'only'; readonly groups: readonly string[] };

export interface IptablesConfig {
  readonly proxyPort: number;
  readonly inboundCapturePort: number;
  readonly inboundTunnelPort: number;
  readonly proxyUID: readonly string[];
  readonly proxyGID: readonly string[];
  readonly inboundInterceptionMode: InterceptionMode;
  readonly inboundTProxyMark: number;
  readonly inboundTProxyRouteTable: number;
  readonly inboundPortsInclude: '*' | readonly number[];
  readonly inboundPortsExclude: readonly number[];
  readonly outboundIPRangesInclude: '*' | readonly Cidr[];
  readonly outboundIPRangesExclude: readonly Cidr[];
  readonly outboundPortsInclude: readonly number[];
  readonly outboundPortsExclude: readonly number[];
  readonly ownerGroups: OwnerGroupFilter;
  readonly rerouteVirtualInterfaces: readonly string[];
  readonly excludeInterfaces: readonly string[];
  readonly redirectDNS: boolean;
  readonly captureAllDNS: boolean;
  readonly dnsServersV4: readonly string[];
  readonly dnsServersV6: readonly string[];
  readonly dropInvalid: boolean;
  readonly enableIPv6: boolean;
  readonly hostIPv4LoopbackCidr: string;
}

export const DEFAULT_PROXY_UID = '1337';
/** Istio limits included owner groups: they become one rule with N `-m owner` matches. */
export const MAX_OWNER_GROUPS_INCLUDE = 64;

/** Splits Istio's comma lists: "" -> [], empty items dropped, items trimmed. */
export function splitList(value: ListLike | undefined): string[] {
  if (value === undefined) return [];
  const items = typeof value === 'string' ? value.split(',') : value.map((v) => String(v));
  return items.map((s) => s.trim()).filter((s) => s !== '');
}

const IFACE = /^[A-Za-z0-9_.:@+-]{1,15}$/;
const OWNER = /^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,31}\$?$/;

class Problems {
  readonly list: string[] = [];
  add(name: string, value: unknown, why: string): void {
    this.list.push(`${name}=${JSON.stringify(value)} ${why}`);
  }
}

function port(p: Problems, name: string, raw: string | number | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const s = String(raw).trim();
  if (!/^\d{1,5}$/.test(s) || Number(s) < 1 || Number(s) > 65535) {
    p.add(name, raw, 'is not a port number (1-65535)');
    return fallback;
  }
  return Number(s);
}

function portList(p: Problems, name: string, raw: ListLike | undefined): number[] {
  const out: number[] = [];
  for (const item of splitList(raw)) {
    if (!/^\d{1,5}$/.test(item) || Number(item) < 1 || Number(item) > 65535) {
      p.add(name, raw, `has ${JSON.stringify(item)}, which is not a port number (1-65535)`);
      continue;
    }
    out.push(Number(item));
  }
  return out;
}

function isWildcard(raw: ListLike | undefined): boolean {
  return typeof raw === 'string' ? raw.trim() === '*' : raw !== undefined && raw.length === 1 && raw[0] === '*';
}

function uint32(p: Problems, name: string, raw: string | number | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback;
  const s = String(raw).trim();
  if (!/^\d{1,10}$/.test(s) || Number(s) > 0xffffffff) {
    p.add(name, raw, 'is not an unsigned 32-bit integer');
    return fallback;
  }
  return Number(s);
}

function cidrList(p: Problems, name: string, raw: ListLike | undefined): Cidr[] {
  const out: Cidr[] = [];
  for (const item of splitList(raw)) {
    const c = parseCidr(item);
    if (c === undefined) p.add(name, raw, `has ${JSON.stringify(item)}, which is not a CIDR (address/length)`);
    else out.push(c);
  }
  return out;
}

function names(p: Problems, name: string, raw: ListLike | undefined, re: RegExp, what: string): string[] {
  const out: string[] = [];
  for (const item of splitList(raw)) {
    if (!re.test(item)) p.add(name, raw, `has ${JSON.stringify(item)}, which is not ${what}`);
    else out.push(item);
  }
  return out;
}

function servers(p: Problems, name: string, raw: readonly string[] | undefined, family: 'v4' | 'v6'): string[] {
  const out: string[] = [];
  for (const s of raw ?? []) {
    if (ipFamily(s) !== family) p.add(name, raw, `has ${JSON.stringify(s)}, which is not an IP${family} address`);
    else out.push(s);
  }
  return out;
}

/** Validates settings into a frozen config, or throws a ConfigError listing every problem. */
export function resolveIptablesConfig(settings: IptablesSettings = {}): IptablesConfig {
  const p = new Problems();
  const s = settings;

  const modeRaw = (s.inboundInterceptionMode ?? '').trim();
  let mode: InterceptionMode = 'REDIRECT';
  if (modeRaw === 'TPROXY') mode = 'TPROXY';
  else if (modeRaw !== '' && modeRaw !== 'REDIRECT') p.add('inboundInterceptionMode', modeRaw, 'is not REDIRECT or TPROXY');

  const proxyUID = names(p, 'proxyUID', s.proxyUID, OWNER, 'a user id or name');
  const proxyGIDRaw = names(p, 'proxyGID', s.proxyGID, OWNER, 'a group id or name');
  const uids = proxyUID.length > 0 ? proxyUID : [DEFAULT_PROXY_UID];

  const inboundAll = isWildcard(s.inboundPortsInclude);
  const outboundAll = isWildcard(s.outboundIPRangesInclude);
  if (isWildcard(s.outboundIPRangesExclude)) {
    p.add('outboundIPRangesExclude', s.outboundIPRangesExclude, 'cannot be "*" (it would exclude all traffic)');
  }

  // Istio turns an empty include list into "capture no group" (a bare `-j RETURN`); an empty
  // value here means "not set", i.e. the default "*".
  const groupsAll = isWildcard(s.ownerGroupsInclude) || splitList(s.ownerGroupsInclude).length === 0;
  const ownerGroups: OwnerGroupFilter = groupsAll
    ? { mode: 'all-except', groups: names(p, 'ownerGroupsExclude', s.ownerGroupsExclude, OWNER, 'a group id or name') }
    : { mode: 'only', groups: names(p, 'ownerGroupsInclude', s.ownerGroupsInclude, OWNER, 'a group id or name') };
  if (ownerGroups.mode === 'only' && ownerGroups.groups.length > MAX_OWNER_GROUPS_INCLUDE) {
    p.add('ownerGroupsInclude', s.ownerGroupsInclude, `lists more than ${MAX_OWNER_GROUPS_INCLUDE} groups`);
  }

  const loopbackRaw = (s.hostIPv4LoopbackCidr ?? '').trim() || '127.0.0.1/32';
  const loopback = parseCidr(loopbackRaw);
  if (loopback === undefined || loopback.family !== 'v4' || !loopback.loopback || loopback.prefixLength < 8) {
    p.add('hostIPv4LoopbackCidr', loopbackRaw, 'is not an IPv4 CIDR inside 127.0.0.0/8');
  }

  const config: IptablesConfig = {
    proxyPort: port(p, 'proxyPort', s.proxyPort, 15001),
    inboundCapturePort: port(p, 'inboundCapturePort', s.inboundCapturePort, 15006),
    inboundTunnelPort: port(p, 'inboundTunnelPort', s.inboundTunnelPort, 15008),
    proxyUID: uids,
    proxyGID: proxyGIDRaw.length > 0 ? proxyGIDRaw : uids,
    inboundInterceptionMode: mode,
    inboundTProxyMark: uint32(p, 'inboundTProxyMark', s.inboundTProxyMark, 1337),
    inboundTProxyRouteTable: uint32(p, 'inboundTProxyRouteTable', s.inboundTProxyRouteTable, 133),
    inboundPortsInclude: inboundAll ? '*' : portList(p, 'inboundPortsInclude', s.inboundPortsInclude),
    inboundPortsExclude: portList(p, 'inboundPortsExclude', s.inboundPortsExclude),
    outboundIPRangesInclude: outboundAll ? '*' : cidrList(p, 'outboundIPRangesInclude', s.outboundIPRangesInclude),
    outboundIPRangesExclude: isWildcard(s.outboundIPRangesExclude)
      ? []
      : cidrList(p, 'outboundIPRangesExclude', s.outboundIPRangesExclude),
    outboundPortsInclude: portList(p, 'outboundPortsInclude', s.outboundPortsInclude),
    outboundPortsExclude: portList(p, 'outboundPortsExclude', s.outboundPortsExclude),
    ownerGroups,
    rerouteVirtualInterfaces: names(p, 'rerouteVirtualInterfaces', s.rerouteVirtualInterfaces, IFACE, 'an interface name'),
    excludeInterfaces: names(p, 'excludeInterfaces', s.excludeInterfaces, IFACE, 'an interface name'),
    redirectDNS: s.redirectDNS ?? false,
    captureAllDNS: s.captureAllDNS ?? false,
    dnsServersV4: servers(p, 'dnsServersV4', s.dnsServersV4, 'v4'),
    dnsServersV6: servers(p, 'dnsServersV6', s.dnsServersV6, 'v6'),
    dropInvalid: s.dropInvalid ?? false,
    enableIPv6: s.enableIPv6 ?? false,
    hostIPv4LoopbackCidr: loopback?.text ?? '127.0.0.1/32',
  };
  if (p.list.length > 0) throw new ConfigError(p.list);
  return deepFreeze(config);
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
