/**
 * Test support: throwaway network namespaces (`ip netns add`), real iptables inside them.
 * `netnsUnavailable()` says why a test must skip (not root, no iproute2, no iptables), or undefined.
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
  probe = netnsProbe(`cbipt-probe-${process.pid}`);
  return probe;
}

/**
 * Adds a namespace, runs iptables-save and ip6tables-save in it and removes it: the reason this
 * fails (naming the Debian package that is missing), or undefined. Call it as root.
 */
export function netnsProbe(name: string): string | undefined {
  const add = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  if ((add.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT') return 'ip is not installed (Debian package iproute2)';
  if (add.status !== 0) return `ip netns add failed: ${(add.stderr || String(add.error)).trim()}`;
  try {
    for (const save of ['iptables-save', 'ip6tables-save']) {
      const r = spawnSync('ip', ['netns', 'exec', name, save], { encoding: 'utf8' });
      if (r.status !== 0) return `${save} in a network namespace failed: ${(r.stderr || String(r.error)).trim()} (Debian package iptables)`;
    }
    return undefined;
  } finally {
    spawnSync('ip', ['netns', 'del', name]);
  }
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
