/**
 * The CNI plugin -> node broker registration protocol, Istio's `CNIPluginAddEvent`: HTTP
 * `POST /cmdadd` over the Unix socket `<cni_agent_run_dir>/pluginevent.sock` with the body as Go
 * encodes Istio's struct:
 *
 *   {"Netns":"/var/run/netns/x","PodName":"web-1","PodNamespace":"mesh",
 *    "IPs":[{"Interface":0,"Address":{"IP":"10.244.1.7","Mask":"////AA=="},"Gateway":"10.244.1.1"}]}
 *
 * (`Mask` is the base64 of the mask bytes, 4 for IPv4 and 16 for IPv6; `IPs` is null when the
 * plugin has none). 200 = registered; 503 = the broker could not look the pod up yet (the
 * plugin fails the ADD with "try again later").
 *
 * Both ends use this file: the plugin's client (src/cni/plugin/cni-event-client.ts) encodes with
 * `encodeCniAddEvent`, the broker's registration server decodes with `decodeCniAddEvent`, so
 * Istio's own plugin and ours can register with the broker. The plugin is a short-lived process:
 * this file imports nothing.
 */

export const CNI_ADD_EVENT_PATH = '/cmdadd';
export const CNI_ADD_EVENT_METHOD = 'POST';
export const CNI_ADD_EVENT_CONTENT_TYPE = 'application/json';
/** The broker's answer when the pod cannot be looked up yet: the plugin asks the runtime to retry. */
export const CNI_ADD_EVENT_RETRY_STATUS = 503;

/** Istio's default `cni_agent_run_dir`: where install-cni, the plugin and the broker meet. */
export const DEFAULT_CNI_AGENT_RUN_DIR = '/var/run/istio-cni';
/** The registration socket's file name in the run dir. */
export const CNI_EVENT_SOCKET_NAME = 'pluginevent.sock';
/** The broker's default registration socket. */
export const DEFAULT_CNI_EVENT_SOCKET = `${DEFAULT_CNI_AGENT_RUN_DIR}/${CNI_EVENT_SOCKET_NAME}`;
/** The plugin kubeconfig's file name in the run dir (written by install-cni, read by the plugin). */
export const CNI_KUBECONFIG_FILE_NAME = 'istio-cni-kubeconfig';

/**
 * Istio's `IPConfig{Interface *int; Address net.IPNet; Gateway net.IP}` in Go's JSON. Go writes
 * an empty `net.IP` as `""` and a nil mask as `null`; certbroker's plugin writes `null` for an
 * absent gateway. The decoder accepts all of these.
 */
export interface PodIpConfig {
  readonly Interface: number | null;
  readonly Address: { readonly IP: string; readonly Mask: string | null } | null;
  readonly Gateway: string | null;
}

/** Istio's `CNIPluginAddEvent`. */
export interface CniPluginAddEvent {
  readonly Netns: string;
  readonly PodName: string;
  readonly PodNamespace: string;
  readonly IPs: readonly PodIpConfig[] | null;
}

/** Mask bytes for a prefix length, base64 as Go encodes a []byte. */
function maskBase64(bits: number, bytes: number): string {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i < bytes; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8));
    b[i] = take === 0 ? 0 : (0xff << (8 - take)) & 0xff;
  }
  return b.toString('base64');
}

/** One CNI result IP (`address` in CIDR notation) in Istio's wire shape; undefined if it does not parse. */
export function toPodIpConfig(ip: { address: string; gateway?: string; interface?: number }): PodIpConfig | undefined {
  const m = /^([^/]+)\/(\d{1,3})$/.exec(ip.address);
  if (!m) return undefined;
  const v6 = m[1]!.includes(':');
  const bits = Number(m[2]);
  if (bits > (v6 ? 128 : 32)) return undefined;
  return {
    Interface: ip.interface ?? null,
    Address: { IP: m[1]!, Mask: maskBase64(bits, v6 ? 16 : 4) },
    Gateway: ip.gateway ?? null,
  };
}

/** The request body, fields in Go's order (Netns, PodName, PodNamespace, IPs). */
export function encodeCniAddEvent(event: CniPluginAddEvent): string {
  return JSON.stringify({
    Netns: event.Netns,
    PodName: event.PodName,
    PodNamespace: event.PodNamespace,
    IPs:
      event.IPs === null
        ? null
        : event.IPs.map((ip) => ({
            Interface: ip.Interface,
            Address: ip.Address === null ? null : { IP: ip.Address.IP, Mask: ip.Address.Mask },
            Gateway: ip.Gateway,
          })),
  });
}

export type DecodedCniAddEvent = { readonly ok: true; readonly event: CniPluginAddEvent } | { readonly ok: false; readonly problem: string };

const POD_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** A JSON object (not null, not an array): the room's decoders share it. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** A request body parsed as a JSON object, or the problem ('body is not JSON' / 'not a JSON object'): the room's decoders share it. */
export function parseJsonObject(body: string): Record<string, unknown> | string {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return 'body is not JSON';
  }
  return isObject(raw) ? raw : 'body is not a JSON object';
}

/** A string or null/absent (null); undefined when it is neither. */
function optionalString(v: unknown): string | null | undefined {
  if (v === undefined || v === null) return null;
  return typeof v === 'string' ? v : undefined;
}

function decodeIp(raw: unknown, at: string): PodIpConfig | string {
  if (!isObject(raw)) return `${at} is not an object`;
  const ifaceRaw = raw['Interface'] ?? null;
  if (ifaceRaw !== null && (typeof ifaceRaw !== 'number' || !Number.isInteger(ifaceRaw))) return `${at}.Interface must be an integer or null`;
  const addr = raw['Address'] ?? null;
  let address: PodIpConfig['Address'] = null;
  if (addr !== null) {
    if (!isObject(addr)) return `${at}.Address must be an object or null`;
    const ip = optionalString(addr['IP']);
    const mask = optionalString(addr['Mask']);
    if (ip === undefined) return `${at}.Address.IP must be a string`;
    if (mask === undefined) return `${at}.Address.Mask must be a string or null`;
    address = { IP: ip ?? '', Mask: mask };
  }
  const gateway = optionalString(raw['Gateway']);
  if (gateway === undefined) return `${at}.Gateway must be a string or null`;
  return { Interface: ifaceRaw, Address: address, Gateway: gateway };
}

/**
 * Reads a request body: PodName and PodNamespace must be Kubernetes names, Netns a string (absent:
 * ""), IPs null/absent or a list of IPConfig objects. The first problem is named.
 */
export function decodeCniAddEvent(body: string): DecodedCniAddEvent {
  const fail = (problem: string): DecodedCniAddEvent => ({ ok: false, problem });
  const raw = parseJsonObject(body);
  if (typeof raw === 'string') return fail(raw);
  const podName = raw['PodName'];
  const podNamespace = raw['PodNamespace'];
  const netns = raw['Netns'] ?? '';
  const ipsRaw = raw['IPs'] ?? null;
  if (typeof podName !== 'string' || podName.length > 253 || !POD_NAME.test(podName)) return fail('PodName is missing or not a pod name');
  if (typeof podNamespace !== 'string' || podNamespace.length > 63 || !POD_NAME.test(podNamespace)) {
    return fail('PodNamespace is missing or not a namespace name');
  }
  if (typeof netns !== 'string') return fail('Netns must be a string');
  let ips: PodIpConfig[] | null = null;
  if (ipsRaw !== null) {
    if (!Array.isArray(ipsRaw)) return fail('IPs must be an array or null');
    ips = [];
    for (const [i, entry] of ipsRaw.entries()) {
      const ip = decodeIp(entry, `IPs[${i}]`);
      if (typeof ip === 'string') return fail(ip);
      ips.push(ip);
    }
  }
  return { ok: true, event: { Netns: netns, PodName: podName, PodNamespace: podNamespace, IPs: ips } };
}
