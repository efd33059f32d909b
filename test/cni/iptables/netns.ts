/**
 * Test support: throwaway network namespaces (`ip netns add`), real iptables inside them.
 * `netnsUnavailable()` says why a test must skip (not root, no `ip netns`), or undefined.
 */
import { execFileSync, spawnSync } from 'node:child_process';

let counter = 0;

export interface TestNetns {
  readonly name: string;
  readonly path: string;
  /** Runs a command inside the namespace; returns stdout, throws on a non-zero exit. */
  exec(cmd: string, args: readonly string[], input?: string): string;
  remove(): void;
}

let probe: string | undefined | null = null;

export function netnsUnavailable(): string | undefined {
  if (probe !== null) return probe;
  if (process.getuid?.() !== 0) {
    probe = 'needs root for ip netns and iptables';
    return probe;
  }
  const name = `cbipt-probe-${process.pid}`;
  const add = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  if (add.status !== 0) {
    probe = `ip netns add failed: ${(add.stderr || String(add.error)).trim()}`;
    return probe;
  }
  const ipt = spawnSync('ip', ['netns', 'exec', name, 'iptables-save'], { encoding: 'utf8' });
  spawnSync('ip', ['netns', 'del', name]);
  probe = ipt.status === 0 ? undefined : `iptables-save in a netns failed: ${ipt.stderr.trim()}`;
  return probe;
}

/** A fresh namespace with lo up (and, if asked, a dummy NIC carrying the given addresses). */
export function createNetns(options: { readonly addresses?: readonly string[] } = {}): TestNetns {
  const name = `cbipt-${process.pid}-${++counter}`;
  execFileSync('ip', ['netns', 'add', name]);
  const exec = (cmd: string, args: readonly string[], input?: string) =>
    execFileSync('ip', ['netns', 'exec', name, cmd, ...args], { encoding: 'utf8', input: input ?? '' });
  try {
    setUp(exec, options.addresses);
  } catch (err) {
    spawnSync('ip', ['netns', 'del', name]);
    throw err;
  }
  return {
    name,
    path: `/var/run/netns/${name}`,
    exec,
    remove: () => {
      spawnSync('ip', ['netns', 'del', name]);
    },
  };
}

function setUp(exec: (cmd: string, args: readonly string[]) => string, addresses: readonly string[] | undefined): void {
  exec('ip', ['link', 'set', 'lo', 'up']);
  if (addresses !== undefined && addresses.length > 0) {
    exec('ip', ['link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0']);
    exec('ip', ['link', 'set', 'eth0', 'up']);
    exec('ip', ['link', 'set', 'peer0', 'up']);
    for (const a of addresses) {
      if (a.includes(':')) exec('ip', ['-6', 'addr', 'add', a, 'dev', 'eth0', 'nodad']);
      else exec('ip', ['-4', 'addr', 'add', a, 'dev', 'eth0']);
    }
  }
}

/** `-A` lines and Istio chain declarations of a save, without comments and counters. */
export function ruleLines(save: string): string[] {
  return save
    .split('\n')
    .filter((l) => l.startsWith('-A ') || l.startsWith(':ISTIO_') || l.startsWith('*'))
    .map((l) => (l.startsWith(':') ? (l.split(' ')[0] ?? l) : l));
}

/** Connects two namespaces with a veth pair: `a` gets addrA on eth1, `b` gets addrB on eth1. */
export function linkPair(a: TestNetns, b: TestNetns, addrA: string, addrB: string): void {
  execFileSync('ip', ['-n', a.name, 'link', 'add', 'eth1', 'type', 'veth', 'peer', 'name', 'eth1', 'netns', b.name]);
  for (const [ns, addr] of [[a, addrA], [b, addrB]] as const) {
    execFileSync('ip', ['-n', ns.name, 'addr', 'add', addr, 'dev', 'eth1']);
    execFileSync('ip', ['-n', ns.name, 'link', 'set', 'eth1', 'up']);
  }
}
