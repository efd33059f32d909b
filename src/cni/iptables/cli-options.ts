/**
 * From parsed flags + environment to what a run needs: the builder settings (still missing the
 * values only the system knows: IPv6, resolv.conf nameservers, the proxy user's uid) and the run
 * options. Pure; every problem is collected and reported at once.
 */
import { ConfigError } from '../../core/config.js';
import type { IptablesSettings } from './config.js';
import { ENV, lookup, sourcesOf, type ParsedArgs } from './flags.js';

export type Env = Readonly<Record<string, string | undefined>>;

export interface CliOptions {
  /** Settings from flags/env; proxyUID undefined means "look up $ENVOY_USER". */
  readonly settings: IptablesSettings;
  readonly envoyUser: string;
  /** undefined: detect from the pod addresses. */
  readonly ipv6: boolean | undefined;
  readonly dualStack: boolean;
  readonly resolvConfPath: string;
  readonly dryRun: boolean;
  readonly cleanupOnly: boolean;
  readonly skipRuleApply: boolean;
  readonly runValidation: boolean;
  readonly reconcile: boolean;
  readonly forceLegacy: boolean;
  readonly networkNamespace: string | undefined;
  readonly probePort: number;
  readonly probeTimeoutMs: number;
}

const UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Go duration syntax (`5s`, `500ms`, `1m30s`) to milliseconds; undefined when malformed. */
export function parseDurationMs(text: string): number | undefined {
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  if (text === '') return undefined;
  while (pos < text.length) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (m === null) return undefined;
    total += Number(m[1]) * UNITS[m[2]!]!;
    pos = re.lastIndex;
  }
  return total;
}

export function resolveCliOptions(args: ParsedArgs, env: Env): CliOptions {
  const problems: string[] = [];
  const str = (long: string) => lookup(args, env, long);
  const bool = (long: string, fallback: boolean): boolean => {
    const v = str(long);
    if (v === undefined) return fallback;
    const lower = v.trim().toLowerCase();
    if (lower === 'true' || lower === '1') return true;
    if (lower === 'false' || lower === '0') return false;
    problems.push(`${sourcesOf(long)}=${JSON.stringify(v)} is not a boolean (true|false)`);
    return fallback;
  };
  const envOnly = (name: string) => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };

  const probePortRaw = str('iptables-probe-port') ?? '15002';
  const probePort = /^\d{1,5}$/.test(probePortRaw) && Number(probePortRaw) >= 1 && Number(probePortRaw) <= 65535
    ? Number(probePortRaw)
    : (problems.push(`${sourcesOf('iptables-probe-port')}=${JSON.stringify(probePortRaw)} is not a port number`), 15002);
  const timeoutRaw = str('probe-timeout') ?? '5s';
  const probeTimeoutMs = parseDurationMs(timeoutRaw) ??
    (problems.push(`${sourcesOf('probe-timeout')}=${JSON.stringify(timeoutRaw)} is not a duration (e.g. 5s, 500ms)`), 5000);

  const ipv6Raw = str('ipv6');
  const ipv6 = ipv6Raw === undefined ? undefined : bool('ipv6', false);
  const setIf = <K extends keyof IptablesSettings>(o: Record<string, unknown>, key: K, v: IptablesSettings[K] | undefined) => {
    if (v !== undefined) o[key] = v;
  };
  const settings: Record<string, unknown> = {};
  setIf(settings, 'proxyPort', str('envoy-port'));
  setIf(settings, 'inboundCapturePort', str('inbound-capture-port'));
  setIf(settings, 'inboundTunnelPort', str('inbound-tunnel-port'));
  setIf(settings, 'proxyUID', str('proxy-uid'));
  setIf(settings, 'proxyGID', str('proxy-gid'));
  setIf(settings, 'inboundInterceptionMode', str('istio-inbound-interception-mode'));
  setIf(settings, 'inboundTProxyMark', str('istio-inbound-tproxy-mark'));
  setIf(settings, 'inboundTProxyRouteTable', str('istio-inbound-tproxy-route-table'));
  setIf(settings, 'inboundPortsInclude', str('istio-inbound-ports'));
  setIf(settings, 'inboundPortsExclude', str('istio-local-exclude-ports'));
  setIf(settings, 'excludeInterfaces', str('istio-exclude-interfaces'));
  setIf(settings, 'outboundIPRangesInclude', str('istio-service-cidr'));
  setIf(settings, 'outboundIPRangesExclude', str('istio-service-exclude-cidr'));
  setIf(settings, 'outboundPortsInclude', str('istio-outbound-ports'));
  setIf(settings, 'outboundPortsExclude', str('istio-local-outbound-ports-exclude'));
  setIf(settings, 'rerouteVirtualInterfaces', str('kube-virt-interfaces'));
  setIf(settings, 'ownerGroupsInclude', envOnly(ENV.OWNER_GROUPS_INCLUDE));
  setIf(settings, 'ownerGroupsExclude', envOnly(ENV.OWNER_GROUPS_EXCLUDE));
  setIf(settings, 'hostIPv4LoopbackCidr', envOnly(ENV.IPV4_LOOPBACK_CIDR));
  settings.redirectDNS = bool('redirect-dns', false);
  settings.captureAllDNS = bool('capture-all-dns', false);
  settings.dropInvalid = bool('drop-invalid', false);

  const opts: CliOptions = {
    settings: settings as IptablesSettings,
    envoyUser: envOnly(ENV.ENVOY_USER) ?? 'istio-proxy',
    ipv6,
    dualStack: bool('dual-stack', false),
    resolvConfPath: str('resolv-conf') ?? '/etc/resolv.conf',
    dryRun: bool('dry-run', false),
    cleanupOnly: bool('cleanup-only', false),
    skipRuleApply: bool('skip-rule-apply', false),
    runValidation: bool('run-validation', false),
    reconcile: bool('reconcile', true),
    forceLegacy: bool('force-legacy-iptables', false),
    networkNamespace: str('network-namespace'),
    probePort,
    probeTimeoutMs,
  };
  bool('restore-format', true);
  bool('cni-mode', false);
  bool('force-apply', false);
  if (problems.length > 0) throw new ConfigError(problems);
  return opts;
}

/** uid of `user` from passwd-format text, or undefined. */
export function uidFromPasswd(passwd: string, user: string): string | undefined {
  for (const line of passwd.split('\n')) {
    const f = line.split(':');
    if (f[0] === user && f[2] !== undefined && /^\d+$/.test(f[2])) return f[2];
  }
  return undefined;
}

/** The flag each builder setting comes from (so errors name what the user typed). */
export const SETTING_FLAG: Readonly<Record<string, string>> = {
  proxyPort: '-p/--envoy-port',
  inboundCapturePort: '-z/--inbound-capture-port',
  inboundTunnelPort: '-e/--inbound-tunnel-port',
  proxyUID: '-u/--proxy-uid',
  proxyGID: '-g/--proxy-gid',
  inboundInterceptionMode: '-m/--istio-inbound-interception-mode',
  inboundTProxyMark: '-t/--istio-inbound-tproxy-mark',
  inboundTProxyRouteTable: '-r/--istio-inbound-tproxy-route-table',
  inboundPortsInclude: '-b/--istio-inbound-ports',
  inboundPortsExclude: '-d/--istio-local-exclude-ports',
  excludeInterfaces: '-c/--istio-exclude-interfaces',
  outboundIPRangesInclude: '-i/--istio-service-cidr',
  outboundIPRangesExclude: '-x/--istio-service-exclude-cidr',
  outboundPortsInclude: '-q/--istio-outbound-ports',
  outboundPortsExclude: '-o/--istio-local-outbound-ports-exclude',
  rerouteVirtualInterfaces: '-k/--kube-virt-interfaces',
  ownerGroupsInclude: ENV.OWNER_GROUPS_INCLUDE,
  ownerGroupsExclude: ENV.OWNER_GROUPS_EXCLUDE,
  hostIPv4LoopbackCidr: ENV.IPV4_LOOPBACK_CIDR,
  dnsServersV4: 'resolv.conf nameserver',
  dnsServersV6: 'resolv.conf nameserver',
};

/** Rewrites builder problems (`proxyPort="x" ...`) to name the flag (`-p/--envoy-port="x" ...`). */
export function problemsForCli(problems: readonly string[]): string[] {
  return problems.map((p) => {
    const m = /^([A-Za-z0-9]+)=/.exec(p);
    const flag = m === null ? undefined : SETTING_FLAG[m[1]!];
    return flag === undefined ? p : `${flag}${p.slice(m![1]!.length)}`;
  });
}
