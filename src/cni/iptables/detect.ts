/**
 * Environment detection for the applier: which iptables backend to drive (legacy or nft) and
 * whether the pod is IPv6. Parsers are pure; the `detect*` functions run commands through a
 * `CommandRunner` (inside the target netns when the runner is bound to one).
 */
import type { CommandRunner } from './exec.js';
import { ipFamily } from './addresses.js';

export type IptablesMode = 'legacy' | 'nft';

/** The binaries for one backend. `iptables-restore` etc. when no variant binaries exist. */
export interface IptablesBinaries {
  readonly mode: IptablesMode | 'default';
  readonly save: { readonly v4: string; readonly v6: string };
  readonly restore: { readonly v4: string; readonly v6: string };
  readonly iptables: { readonly v4: string; readonly v6: string };
  /** Extra restore arguments (legacy takes the xtables lock and should wait for it). */
  readonly restoreArgs: readonly string[];
}

export function binariesFor(mode: IptablesMode | 'default'): IptablesBinaries {
  const sfx = mode === 'default' ? '' : `-${mode}`;
  return {
    mode,
    save: { v4: `iptables${sfx}-save`, v6: `ip6tables${sfx}-save` },
    restore: { v4: `iptables${sfx}-restore`, v6: `ip6tables${sfx}-restore` },
    iptables: { v4: `iptables${sfx}`, v6: `ip6tables${sfx}` },
    restoreArgs: mode === 'nft' ? ['--noflush'] : ['--noflush', '--wait', '30'],
  };
}

/** Markers kubelet leaves in the backend it uses (the kubernetes iptables-wrappers heuristic). */
const KUBE_HINTS = /KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY/;

export function countRules(saveOutput: string): number {
  let n = 0;
  for (const line of saveOutput.split('\n')) if (line.startsWith('-A ')) n++;
  return n;
}

/**
 * Picks the backend the node (or the pod's netns) already uses: the one carrying kubelet's
 * hint chains, else the one with more rules, else nft. Falls back to whichever variant is
 * installed, or to the plain `iptables-*` names.
 */
export async function detectIptablesMode(runner: CommandRunner): Promise<IptablesBinaries> {
  const hasLegacy = runner.has('iptables-legacy-restore');
  const hasNft = runner.has('iptables-nft-restore');
  if (!hasLegacy && !hasNft) return binariesFor('default');
  if (!hasLegacy) return binariesFor('nft');
  if (!hasNft) return binariesFor('legacy');
  const dump = async (mode: IptablesMode) => {
    const b = binariesFor(mode);
    const outs = await Promise.all(
      [b.save.v4, b.save.v6].map(async (cmd) => (runner.has(cmd) ? (await runner.run(cmd, [])).stdout : '')),
    );
    return outs.join('\n');
  };
  const [legacy, nft] = await Promise.all([dump('legacy'), dump('nft')]);
  if (KUBE_HINTS.test(legacy)) return binariesFor('legacy');
  if (KUBE_HINTS.test(nft)) return binariesFor('nft');
  return binariesFor(countRules(legacy) > countRules(nft) ? 'legacy' : 'nft');
}

export interface InterfaceAddress {
  readonly ifname: string;
  readonly family: 'v4' | 'v6';
  readonly address: string;
}

/** Parses `ip -o addr show` lines: `2: eth0    inet 10.0.0.2/24 brd ... scope global eth0`. */
export function parseIpAddr(output: string): InterfaceAddress[] {
  const out: InterfaceAddress[] = [];
  for (const line of output.split('\n')) {
    const m = /^\d+:\s+(\S+?)(?:@\S+)?\s+(inet6?)\s+([0-9a-fA-F.:]+)(?:\/\d+)?\s/.exec(line);
    if (m === null) continue;
    out.push({ ifname: m[1]!, family: m[2] === 'inet6' ? 'v6' : 'v4', address: m[3]! });
  }
  return out;
}

function usable(a: InterfaceAddress): boolean {
  if (ipFamily(a.address) !== a.family) return false;
  if (a.family === 'v4') return !a.address.startsWith('127.') && !a.address.startsWith('169.254.');
  const lower = a.address.toLowerCase();
  return lower !== '::1' && !/^fe[89ab]/.test(lower) && !/^ff0?2:/.test(lower);
}

/**
 * Istio's rule: the pod is IPv6 when the first non-loopback, non-link-local address is IPv6.
 * The kernel lists IPv4 addresses before IPv6 ones, so that means "IPv6 only"; with
 * `dualStack`, any IPv6 address counts. Undefined when the netns has no usable address.
 */
export function ipv6FromAddresses(addrs: readonly InterfaceAddress[], dualStack: boolean): boolean | undefined {
  const ok = addrs.filter(usable);
  const v4 = ok.some((a) => a.family === 'v4');
  const v6 = ok.some((a) => a.family === 'v6');
  if (!v4 && !v6) return undefined;
  return dualStack ? v6 : !v4 && v6;
}

export async function detectIPv6(runner: CommandRunner, dualStack: boolean): Promise<boolean | undefined> {
  const r = await runner.run('ip', ['-o', 'addr', 'show']);
  if (r.code !== 0) return undefined;
  return ipv6FromAddresses(parseIpAddr(r.stdout), dualStack);
}
