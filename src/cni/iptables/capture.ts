/**
 * The capture rules: from an `IptablesConfig` to the ordered iptables commands Istio's
 * istio-iptables produces (sidecar mode), per family. Pure; the order of every call below is
 * the order of the output and is what the conformance goldens pin down.
 *
 * Chains: ISTIO_INBOUND (inbound capture), ISTIO_IN_REDIRECT (-> inbound capture port),
 * ISTIO_REDIRECT (-> proxy port), ISTIO_OUTPUT (outbound decisions), ISTIO_OUTPUT_DNS (DNS
 * capture, nat + raw CT zones), ISTIO_DIVERT / ISTIO_TPROXY (TPROXY mode), ISTIO_DROP.
 */
import type { Cidr } from './addresses.js';
import type { IptablesConfig } from './config.js';
import { IP_PLACEHOLDER as IP, RuleSet } from './rule-set.js';

export const CHAIN = {
  OUTPUT: 'ISTIO_OUTPUT',
  OUTPUT_DNS: 'ISTIO_OUTPUT_DNS',
  INBOUND: 'ISTIO_INBOUND',
  DIVERT: 'ISTIO_DIVERT',
  TPROXY: 'ISTIO_TPROXY',
  REDIRECT: 'ISTIO_REDIRECT',
  IN_REDIRECT: 'ISTIO_IN_REDIRECT',
  DROP: 'ISTIO_DROP',
} as const;

/** Mark for proxy-outbound -> local-app packets in TPROXY mode. */
export const OUTBOUND_MARK = '1338';
/** istio-agent's DNS listener. */
export const DNS_AGENT_PORT = '15053';
/** The passthrough source address of inbound traffic the proxy forwards to the app. */
export const INBOUND_PASSTHROUGH = { v4: '127.0.0.6/32', v6: '::6/128' } as const;

/** Builds every capture rule for `cfg`, in Istio's order. */
export function buildCaptureRules(cfg: IptablesConfig): RuleSet {
  const rb = new RuleSet({ ipv6: cfg.enableIPv6 });
  const loopback = { v4: cfg.hostIPv4LoopbackCidr, v6: '::1/128' };
  const tproxy = cfg.inboundInterceptionMode === 'TPROXY';
  const include = cfg.outboundIPRangesInclude;
  const v4Include = include === '*' ? '*' : include.filter((c) => c.family === 'v4');
  const v6Include = include === '*' ? '*' : include.filter((c) => c.family === 'v6');
  const includesLoopback = include !== '*' && include.some((c) => c.loopback);
  const redirectDNS =
    cfg.redirectDNS && (cfg.captureAllDNS || cfg.dnsServersV4.length > 0 || cfg.dnsServersV6.length > 0);

  // Interfaces that are never captured, then virtual interfaces whose inbound is not inbound.
  for (const nic of cfg.excludeInterfaces) {
    rb.append('nat', 'PREROUTING', '-i', nic, '-j', 'RETURN');
    rb.append('nat', 'OUTPUT', '-o', nic, '-j', 'RETURN');
  }
  if (tproxy) {
    for (const nic of cfg.excludeInterfaces) {
      rb.append('mangle', 'PREROUTING', '-i', nic, '-j', 'RETURN');
      rb.append('mangle', 'OUTPUT', '-o', nic, '-j', 'RETURN');
    }
  }
  for (const nic of cfg.rerouteVirtualInterfaces) rb.insert('nat', 'PREROUTING', 1, '-i', nic, '-j', 'RETURN');

  if (cfg.dropInvalid) {
    rb.append('mangle', 'PREROUTING', '-m', 'conntrack', '--ctstate', 'INVALID', '-j', CHAIN.DROP);
    rb.append('mangle', CHAIN.DROP, '-j', 'DROP');
  }

  // The tunnel port (HBONE) is never redirected; the two redirect chains.
  rb.append('nat', CHAIN.INBOUND, '-p', 'tcp', '--dport', String(cfg.inboundTunnelPort), '-j', 'RETURN');
  rb.append('nat', CHAIN.REDIRECT, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', String(cfg.proxyPort));
  rb.append('nat', CHAIN.IN_REDIRECT, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', String(cfg.inboundCapturePort));

  addInboundCapture(rb, cfg, loopback.v4);

  rb.append('nat', 'OUTPUT', '-j', CHAIN.OUTPUT);
  for (const p of cfg.outboundPortsExclude) {
    rb.append('nat', CHAIN.OUTPUT, '-p', 'tcp', '--dport', String(p), '-j', 'RETURN');
    rb.append('nat', CHAIN.OUTPUT, '-p', 'udp', '--dport', String(p), '-j', 'RETURN');
  }
  rb.appendVersioned('nat', CHAIN.OUTPUT, INBOUND_PASSTHROUGH, '-o', 'lo', '-s', IP, '-j', 'RETURN');

  const tunnel = String(cfg.inboundTunnelPort);
  for (const [match, ids] of [['--uid-owner', cfg.proxyUID], ['--gid-owner', cfg.proxyGID]] as const) {
    for (const id of ids) {
      // App -> own service VIP via the proxy comes back in through the inbound capture port.
      // With DNS capture, uid rules keep port 53 away from it (gid rules never did in Istio).
      const skipPorts =
        redirectDNS && match === '--uid-owner'
          ? ['-m', 'multiport', '!', '--dports', `53,${tunnel}`]
          : ['!', '--dport', tunnel];
      rb.appendVersioned('nat', CHAIN.OUTPUT, loopback, '-o', 'lo', '!', '-d', IP, '-p', 'tcp', ...skipPorts,
        '-m', 'owner', match, id, '-j', CHAIN.IN_REDIRECT);
      // App -> itself over lo is not captured, unless loopback ranges were explicitly included.
      if (!includesLoopback) {
        if (redirectDNS) {
          rb.append('nat', CHAIN.OUTPUT, '-o', 'lo', '-p', 'tcp', '!', '--dport', '53', '-m', 'owner', '!', match, id,
            '-j', 'RETURN');
        } else {
          rb.append('nat', CHAIN.OUTPUT, '-o', 'lo', '-m', 'owner', '!', match, id, '-j', 'RETURN');
        }
      }
      // The proxy's own traffic is never captured (any protocol, any destination).
      rb.append('nat', CHAIN.OUTPUT, '-m', 'owner', match, id, '-j', 'RETURN');
    }
  }

  if (cfg.ownerGroups.mode === 'all-except') {
    for (const g of cfg.ownerGroups.groups) rb.append('nat', CHAIN.OUTPUT, '-m', 'owner', '--gid-owner', g, '-j', 'RETURN');
  } else {
    const noneOf = cfg.ownerGroups.groups.flatMap((g) => ['-m', 'owner', '!', '--gid-owner', g]);
    rb.append('nat', CHAIN.OUTPUT, ...noneOf, '-j', 'RETURN');
  }

  if (redirectDNS) addDnsCapture(rb, cfg);

  // Envoy-aware apps and container-to-container traffic use localhost: leave it alone.
  rb.appendVersioned('nat', CHAIN.OUTPUT, loopback, '-d', IP, '-j', 'RETURN');
  for (const c of cfg.outboundIPRangesExclude) {
    if (c.family === 'v4') rb.appendV4('nat', CHAIN.OUTPUT, '-d', c.text, '-j', 'RETURN');
  }
  for (const c of cfg.outboundIPRangesExclude) {
    if (c.family === 'v6') rb.appendV6('nat', CHAIN.OUTPUT, '-d', c.text, '-j', 'RETURN');
  }
  for (const p of cfg.outboundPortsInclude) {
    rb.append('nat', CHAIN.OUTPUT, '-p', 'tcp', '--dport', String(p), '-j', CHAIN.REDIRECT);
  }
  addOutboundInclude(rb, cfg, 'v4', v4Include);
  addOutboundInclude(rb, cfg, 'v6', v6Include);

  if (tproxy) addTproxyMarks(rb, cfg, loopback);
  return rb;
}

function addInboundCapture(rb: RuleSet, cfg: IptablesConfig, loopbackV4: string): void {
  const include = cfg.inboundPortsInclude;
  if (include !== '*' && include.length === 0) return;
  const tproxy = cfg.inboundInterceptionMode === 'TPROXY';
  const table = tproxy ? 'mangle' : 'nat';
  if (tproxy) {
    // Marked packets are routed to lo (policy routing, see the applier), where TPROXY hands
    // them to the inbound capture port.
    rb.append('mangle', CHAIN.DIVERT, '-j', 'MARK', '--set-mark', String(cfg.inboundTProxyMark));
    rb.append('mangle', CHAIN.DIVERT, '-j', 'ACCEPT');
    rb.appendVersioned('mangle', CHAIN.TPROXY, { v4: loopbackV4, v6: '::1/128' }, '!', '-d', IP, '-p', 'tcp',
      '-j', 'TPROXY', '--tproxy-mark', `${cfg.inboundTProxyMark}/0xffffffff`, '--on-port', String(cfg.inboundCapturePort));
  }
  rb.append(table, 'PREROUTING', '-p', 'tcp', '-j', CHAIN.INBOUND);
  if (include === '*') {
    for (const p of cfg.inboundPortsExclude) rb.append(table, CHAIN.INBOUND, '-p', 'tcp', '--dport', String(p), '-j', 'RETURN');
    if (tproxy) {
      rb.append('mangle', CHAIN.INBOUND, '-p', 'tcp', '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', CHAIN.DIVERT);
      rb.append('mangle', CHAIN.INBOUND, '-p', 'tcp', '-j', CHAIN.TPROXY);
    } else {
      rb.append('nat', CHAIN.INBOUND, '-p', 'tcp', '-j', CHAIN.IN_REDIRECT);
    }
    return;
  }
  for (const p of include) {
    const port = String(p);
    if (tproxy) {
      rb.append('mangle', CHAIN.INBOUND, '-p', 'tcp', '--dport', port, '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED',
        '-j', CHAIN.DIVERT);
      rb.append('mangle', CHAIN.INBOUND, '-p', 'tcp', '--dport', port, '-j', CHAIN.TPROXY);
    } else {
      rb.append('nat', CHAIN.INBOUND, '-p', 'tcp', '--dport', port, '-j', CHAIN.IN_REDIRECT);
    }
  }
}

function addOutboundInclude(rb: RuleSet, cfg: IptablesConfig, family: 'v4' | 'v6', include: '*' | readonly Cidr[]): void {
  const append = (...params: string[]) =>
    family === 'v4' ? rb.appendV4('nat', CHAIN.OUTPUT, ...params) : rb.appendV6('nat', CHAIN.OUTPUT, ...params);
  const insert = (...params: string[]) =>
    family === 'v4' ? rb.insertV4('nat', 'PREROUTING', 1, ...params) : rb.insertV6('nat', 'PREROUTING', 1, ...params);
  if (include === '*') {
    append('-j', CHAIN.REDIRECT);
    for (const nic of cfg.rerouteVirtualInterfaces) insert('-i', nic, '-j', CHAIN.REDIRECT);
    return;
  }
  for (const c of include) {
    for (const nic of cfg.rerouteVirtualInterfaces) insert('-i', nic, '-d', c.text, '-j', CHAIN.REDIRECT);
    append('-d', c.text, '-j', CHAIN.REDIRECT);
  }
}

function addDnsCapture(rb: RuleSet, cfg: IptablesConfig): void {
  const all = cfg.captureAllDNS;
  const v4 = cfg.dnsServersV4;
  const v6 = cfg.dnsServersV6;
  rb.append('raw', 'OUTPUT', '-j', CHAIN.OUTPUT_DNS);
  if (all || v4.length > 0) rb.appendV4('nat', CHAIN.OUTPUT, '-j', CHAIN.OUTPUT_DNS);
  if (all || v6.length > 0) rb.appendV6('nat', CHAIN.OUTPUT, '-j', CHAIN.OUTPUT_DNS);

  for (const proto of ['tcp', 'udp'] as const) {
    // Istio spells the udp REDIRECT option `--to-port` (an accepted abbreviation).
    const to = proto === 'tcp' ? '--to-ports' : '--to-port';
    if (all) {
      rb.append('nat', CHAIN.OUTPUT_DNS, '-p', proto, '--dport', '53', '-j', 'REDIRECT', to, DNS_AGENT_PORT);
      continue;
    }
    for (const s of v4) {
      rb.appendV4('nat', CHAIN.OUTPUT_DNS, '-p', proto, '--dport', '53', '-d', `${s}/32`, '-j', 'REDIRECT', to, DNS_AGENT_PORT);
    }
    for (const s of v6) {
      rb.appendV6('nat', CHAIN.OUTPUT_DNS, '-p', proto, '--dport', '53', '-d', `${s}/128`, '-j', 'REDIRECT', to, DNS_AGENT_PORT);
    }
  }

  // Conntrack zones keep proxy<->upstream (zone 1) and app<->proxy (zone 2) DNS flows apart.
  for (const [match, ids] of [['--uid-owner', cfg.proxyUID], ['--gid-owner', cfg.proxyGID]] as const) {
    for (const id of ids) {
      rb.append('raw', CHAIN.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-m', 'owner', match, id, '-j', 'CT', '--zone', '1');
      rb.append('raw', CHAIN.OUTPUT_DNS, '-p', 'udp', '--sport', DNS_AGENT_PORT, '-m', 'owner', match, id, '-j', 'CT', '--zone', '2');
    }
  }
  if (all) {
    rb.append('raw', 'PREROUTING', '-j', CHAIN.INBOUND);
    rb.append('raw', CHAIN.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-j', 'CT', '--zone', '2');
    rb.append('raw', CHAIN.INBOUND, '-p', 'udp', '--sport', '53', '-j', 'CT', '--zone', '1');
    return;
  }
  if (v4.length > 0) rb.appendV4('raw', 'PREROUTING', '-j', CHAIN.INBOUND);
  for (const s of v4) {
    rb.appendV4('raw', CHAIN.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-d', `${s}/32`, '-j', 'CT', '--zone', '2');
    rb.appendV4('raw', CHAIN.INBOUND, '-p', 'udp', '--sport', '53', '-s', `${s}/32`, '-j', 'CT', '--zone', '1');
  }
  if (v6.length > 0) rb.appendV6('raw', 'PREROUTING', '-j', CHAIN.INBOUND);
  for (const s of v6) {
    rb.appendV6('raw', CHAIN.OUTPUT_DNS, '-p', 'udp', '--dport', '53', '-d', `${s}/128`, '-j', 'CT', '--zone', '2');
    rb.appendV6('raw', CHAIN.INBOUND, '-p', 'udp', '--sport', '53', '-s', `${s}/128`, '-j', 'CT', '--zone', '1');
  }
}

function addTproxyMarks(rb: RuleSet, cfg: IptablesConfig, loopback: { v4: string; v6: string }): void {
  const mark = String(cfg.inboundTProxyMark);
  // Keep the mark set by Envoy's original_src filter on the connection.
  rb.append('mangle', 'PREROUTING', '-p', 'tcp', '-m', 'mark', '--mark', mark, '-j', 'CONNMARK', '--save-mark');
  // Already-marked proxy -> app packets are not marked again.
  rb.append('mangle', 'OUTPUT', '-p', 'tcp', '-o', 'lo', '-m', 'mark', '--mark', mark, '-j', 'RETURN');
  for (const [match, ids] of [['--uid-owner', cfg.proxyUID], ['--gid-owner', cfg.proxyGID]] as const) {
    for (const id of ids) {
      // app -> VIP -> proxy outbound -(1338)-> proxy inbound -> app
      rb.appendVersioned('mangle', 'OUTPUT', loopback, '!', '-d', IP, '-p', 'tcp', '-o', 'lo', '-m', 'owner', match, id,
        '-j', 'MARK', '--set-mark', OUTBOUND_MARK);
    }
  }
  rb.append('mangle', 'OUTPUT', '-p', 'tcp', '-m', 'connmark', '--mark', mark, '-j', 'CONNMARK', '--restore-mark');
  rb.insert('mangle', CHAIN.INBOUND, 1, '-p', 'tcp', '-m', 'mark', '--mark', mark, '-j', 'RETURN');
  rb.insertV4('mangle', CHAIN.INBOUND, 2, '-p', 'tcp', '-s', INBOUND_PASSTHROUGH.v4, '-i', 'lo', '-j', 'RETURN');
  rb.insertV6('mangle', CHAIN.INBOUND, 2, '-p', 'tcp', '-s', INBOUND_PASSTHROUGH.v6, '-i', 'lo', '-j', 'RETURN');
  rb.insert('mangle', CHAIN.INBOUND, 3, '-p', 'tcp', '-i', 'lo', '-m', 'mark', '!', '--mark', OUTBOUND_MARK, '-j', 'RETURN');
}
