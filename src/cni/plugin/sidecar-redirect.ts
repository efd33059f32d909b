/**
 * Sidecar pods (pure): whether the plugin must program redirection for a pod, and with which
 * settings — Istio's reading of the pod (annotations `traffic.sidecar.istio.io/*`,
 * `sidecar.istio.io/interceptionMode`, the istio-proxy container's env and runAsUser/runAsGroup),
 * expressed with istio-iptables' setting names.
 */
import { CniError } from './cni-error.js';
import { SIDECAR_STATUS_ANNOTATION } from './enablement.js';
import type { ContainerInfo, PodInfo } from './pod-info.js';

export const ISTIO_PROXY_CONTAINER = 'istio-proxy';
export const ISTIO_INIT_CONTAINER = 'istio-init';
export const INJECT_KEY = 'sidecar.istio.io/inject';

export const ANNOTATIONS = Object.freeze({
  interceptionMode: 'sidecar.istio.io/interceptionMode',
  includeOutboundIPRanges: 'traffic.sidecar.istio.io/includeOutboundIPRanges',
  excludeOutboundIPRanges: 'traffic.sidecar.istio.io/excludeOutboundIPRanges',
  includeInboundPorts: 'traffic.sidecar.istio.io/includeInboundPorts',
  excludeInboundPorts: 'traffic.sidecar.istio.io/excludeInboundPorts',
  includeOutboundPorts: 'traffic.sidecar.istio.io/includeOutboundPorts',
  excludeOutboundPorts: 'traffic.sidecar.istio.io/excludeOutboundPorts',
  excludeInterfaces: 'traffic.sidecar.istio.io/excludeInterfaces',
  kubevirtInterfaces: 'traffic.sidecar.istio.io/kubevirtInterfaces',
  rerouteVirtualInterfaces: 'istio.io/reroute-virtual-interfaces',
});

/** Proxy container env vars the plugin reads. */
export const PROXY_ENV = Object.freeze({
  dnsCapture: 'ISTIO_META_DNS_CAPTURE',
  dualStack: 'ISTIO_DUAL_STACK',
  invalidDrop: 'INVALID_DROP',
  disableEnvoy: 'DISABLE_ENVOY',
});

const DEFAULT_PROXY_ID = '1337';
const STATUS_PORT = '15020';

/** What istio-iptables is asked to do for one sidecar pod (its own setting names). */
export interface SidecarRedirect {
  readonly proxyPort: string;
  readonly proxyUID: string;
  readonly proxyGID: string;
  readonly inboundInterceptionMode: 'REDIRECT' | 'TPROXY';
  readonly outboundIPRangesInclude: string;
  readonly outboundIPRangesExclude: string;
  readonly inboundPortsInclude: string;
  readonly inboundPortsExclude: string;
  readonly outboundPortsInclude: string;
  readonly outboundPortsExclude: string;
  readonly rerouteVirtualInterfaces: string;
  readonly excludeInterfaces: string;
  readonly redirectDNS: boolean;
  readonly captureAllDNS: boolean;
  readonly dropInvalid: boolean;
  readonly dualStack: boolean;
}

export type SidecarDecision =
  | { readonly redirect: true; readonly settings: SidecarRedirect }
  | { readonly redirect: false; readonly reason: string };

/** Go's strconv.ParseBool. */
function parseGoBool(v: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(v)) return false;
  return undefined;
}

function isPort(s: string): boolean {
  const t = s.trim();
  return /^\d+$/.test(t) && Number(t) <= 65535;
}

function validatePorts(value: string, wildcard: boolean): boolean {
  if (wildcard && value === '*') return true;
  if (value.trim() === '') return true;
  return value.trim().split(',').every(isPort);
}

function isCidr(s: string): boolean {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(s);
  if (!m) return false;
  const ip = m[1]!;
  const bits = Number(m[2]);
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(ip)) return ip.split('.').every((o) => Number(o) <= 255 && !/^0\d/.test(o)) && bits <= 32;
  return ip.includes(':') && /^[0-9a-fA-F:.]+$/.test(ip) && bits <= 128;
}

function validateCidrs(value: string, wildcard: boolean): boolean {
  if (wildcard && value === '*') return true;
  if (value === '') return true;
  return value.split(',').every(isCidr);
}

function validateInterfaces(value: string): boolean {
  if (value === '') return true;
  return value.split(',').every((n) => n.length > 0 && n.length <= 15 && n !== '.' && n !== '..' && !/[/\s:]/.test(n));
}

function proxyEnv(c: ContainerInfo | undefined): Map<string, string> {
  const m = new Map<string, string>();
  for (const e of c?.env ?? []) m.set(e.name, e.value ?? '');
  return m;
}

export function sidecarDecision(pod: PodInfo): SidecarDecision {
  const all = [...pod.initContainers, ...pod.containers];
  if (all.some((c) => c.name === ISTIO_INIT_CONTAINER)) return { redirect: false, reason: 'pod has an istio-init container' };
  const proxy = all.find((c) => c.name === ISTIO_PROXY_CONTAINER);
  const env = proxyEnv(proxy);
  if (parseGoBool(env.get(PROXY_ENV.disableEnvoy) ?? '') === true) return { redirect: false, reason: 'DISABLE_ENVOY on istio-proxy' };
  if (!proxy) return { redirect: false, reason: 'no istio-proxy container' };
  if (proxy.args.length >= 2 && proxy.args[0] === 'proxy' && proxy.args[1] !== 'sidecar') {
    return { redirect: false, reason: `proxy type ${proxy.args[1]}` };
  }
  const inject = pod.labels[INJECT_KEY] ?? pod.annotations[INJECT_KEY] ?? '';
  if (inject !== '' && parseGoBool(inject) === false) return { redirect: false, reason: 'injection disabled' };
  if (!Object.prototype.hasOwnProperty.call(pod.annotations, SIDECAR_STATUS_ANNOTATION)) {
    return { redirect: false, reason: `no ${SIDECAR_STATUS_ANNOTATION} annotation` };
  }
  return { redirect: true, settings: redirectSettings(pod.annotations, proxy) };
}

/** Settings from the annotations and proxy container; throws ERR_CNI_REDIRECT_PARAMS on bad values. */
export function redirectSettings(annotations: Readonly<Record<string, string>>, proxy: ContainerInfo | undefined): SidecarRedirect {
  const bad: string[] = [];
  const get = (key: string, fallback: string, valid: (v: string) => boolean): string => {
    if (!Object.prototype.hasOwnProperty.call(annotations, key)) return fallback;
    const v = annotations[key]!;
    if (!valid(v)) {
      bad.push(`${key}=${JSON.stringify(v)}`);
      return fallback;
    }
    return v;
  };
  const mode = get(ANNOTATIONS.interceptionMode, 'REDIRECT', (v) => v === 'REDIRECT' || v === 'TPROXY') as 'REDIRECT' | 'TPROXY';
  const includeIPs = get(ANNOTATIONS.includeOutboundIPRanges, '*', (v) => validateCidrs(v, true));
  const excludeIPs = get(ANNOTATIONS.excludeOutboundIPRanges, '', (v) => validateCidrs(v, false));
  let excludeInbound = get(ANNOTATIONS.excludeInboundPorts, STATUS_PORT, (v) => validatePorts(v, true));
  const includeInbound = get(ANNOTATIONS.includeInboundPorts, '*', (v) => validatePorts(v, true));
  const excludeOutbound = get(ANNOTATIONS.excludeOutboundPorts, STATUS_PORT, (v) => validatePorts(v, true));
  const includeOutbound = get(ANNOTATIONS.includeOutboundPorts, '', (v) => validatePorts(v, true));
  const excludeInterfaces = get(ANNOTATIONS.excludeInterfaces, '', validateInterfaces);
  const reroute = Object.prototype.hasOwnProperty.call(annotations, ANNOTATIONS.rerouteVirtualInterfaces)
    ? get(ANNOTATIONS.rerouteVirtualInterfaces, '', () => true)
    : get(ANNOTATIONS.kubevirtInterfaces, '', () => true);
  if (bad.length > 0) {
    throw new CniError('ERR_CNI_REDIRECT_PARAMS', `invalid sidecar traffic annotations: ${bad.join(', ')}`);
  }
  // Istio always keeps the status, health and metrics ports out of inbound capture.
  excludeInbound = excludeInbound.trim();
  if (excludeInbound !== '' && !excludeInbound.endsWith(',')) excludeInbound += ',';
  excludeInbound += '15020,15021,15090';
  excludeInbound = [...new Set(excludeInbound.split(','))].join(',');

  const env = proxyEnv(proxy);
  const flag = (name: string) => parseGoBool(env.get(name) ?? '') === true;
  const uid = proxy?.runAsUser;
  const gid = proxy?.runAsGroup;
  return Object.freeze({
    proxyPort: '15001',
    proxyUID: uid !== undefined && uid !== 0 ? String(uid) : DEFAULT_PROXY_ID,
    proxyGID: gid !== undefined && gid !== 0 ? String(gid) : DEFAULT_PROXY_ID,
    inboundInterceptionMode: mode,
    outboundIPRangesInclude: includeIPs,
    outboundIPRangesExclude: excludeIPs,
    inboundPortsInclude: includeInbound,
    inboundPortsExclude: excludeInbound,
    outboundPortsInclude: includeOutbound,
    outboundPortsExclude: excludeOutbound,
    rerouteVirtualInterfaces: reroute,
    excludeInterfaces,
    redirectDNS: flag(PROXY_ENV.dnsCapture),
    captureAllDNS: flag(PROXY_ENV.dnsCapture),
    dropInvalid: flag(PROXY_ENV.invalidDrop),
    dualStack: flag(PROXY_ENV.dualStack),
  });
}
