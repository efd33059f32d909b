/**
 * istio-iptables command line: Istio's flags (short and long forms), the environment variables
 * Istio reads for them, and a parser for both. Pure: argv and env come in as values.
 *
 * Precedence per option: the flag, then the env var named after the flag (Istio binds every
 * flag to the upper-cased flag name with '-' -> '_', e.g. ENVOY_PORT, ISTIO_INBOUND_PORTS),
 * then Istio's extra env var for it (ISTIO_META_DNS_CAPTURE, INVALID_DROP, ...), then the default.
 * Syntax accepted: `-p 15001`, `-p15001`, `--envoy-port 15001`, `--envoy-port=15001`,
 * booleans as `--dry-run`, `--dry-run=false`, `-n`.
 */
import { IptablesError } from './errors.js';

type Kind = 'string' | 'bool';

interface FlagSpec {
  readonly long: string;
  readonly short?: string;
  readonly kind: Kind;
  /** Env vars consulted, in order, when the flag is absent. */
  readonly env: readonly string[];
  readonly help: string;
}

const envOf = (long: string) => long.toUpperCase().replace(/-/g, '_');

function flag(long: string, short: string | undefined, kind: Kind, help: string, extraEnv: readonly string[] = []): FlagSpec {
  return { long, kind, env: [envOf(long), ...extraEnv], help, ...(short === undefined ? {} : { short }) };
}

/** Every flag the CLI accepts. */
export const FLAGS: readonly FlagSpec[] = [
  flag('envoy-port', 'p', 'string', 'port all outbound TCP traffic is redirected to (default 15001)'),
  flag('inbound-capture-port', 'z', 'string', 'port all inbound TCP traffic is redirected to (default 15006)'),
  flag('inbound-tunnel-port', 'e', 'string', 'inbound tunnel (HBONE) port, never redirected (default 15008)'),
  flag('proxy-uid', 'u', 'string', 'UIDs whose traffic is not redirected (default: uid of $ENVOY_USER, else 1337)'),
  flag('proxy-gid', 'g', 'string', 'GIDs whose traffic is not redirected (default: same as -u)'),
  flag('istio-inbound-interception-mode', 'm', 'string', 'inbound mode: REDIRECT (default) or TPROXY', ['INBOUND_INTERCEPTION_MODE']),
  flag('istio-inbound-tproxy-mark', 't', 'string', 'TPROXY packet mark (default 1337)', ['INBOUND_TPROXY_MARK']),
  flag('istio-inbound-tproxy-route-table', 'r', 'string', 'TPROXY routing table (default 133)'),
  flag('istio-inbound-ports', 'b', 'string', 'inbound ports to capture, "*" for all, "" for none'),
  flag('istio-local-exclude-ports', 'd', 'string', 'inbound ports not captured when -b is "*"'),
  flag('istio-exclude-interfaces', 'c', 'string', 'interfaces whose traffic is never captured'),
  flag('istio-service-cidr', 'i', 'string', 'outbound CIDRs to capture, "*" for all, "" for none'),
  flag('istio-service-exclude-cidr', 'x', 'string', 'outbound CIDRs never captured'),
  flag('istio-outbound-ports', 'q', 'string', 'outbound ports always captured'),
  flag('istio-local-outbound-ports-exclude', 'o', 'string', 'outbound ports never captured'),
  flag('kube-virt-interfaces', 'k', 'string', 'virtual interfaces whose inbound traffic is treated as outbound'),
  flag('dry-run', 'n', 'bool', 'print the iptables-restore input per family; change nothing'),
  flag('restore-format', 'f', 'bool', 'accepted for compatibility (output is always restore format)'),
  flag('iptables-probe-port', undefined, 'string', 'port the validation client connects to (default 15002)'),
  flag('probe-timeout', undefined, 'string', 'validation timeout, e.g. 5s, 500ms (default 5s)'),
  flag('skip-rule-apply', undefined, 'bool', 'do not change iptables (useful with --run-validation)'),
  flag('run-validation', undefined, 'bool', 'check that 127.0.0.6:<probe port> is redirected to the proxy; exit 126 if not'),
  flag('redirect-dns', undefined, 'bool', 'capture DNS to the agent on :15053 (default $ISTIO_META_DNS_CAPTURE)', ['ISTIO_META_DNS_CAPTURE']),
  flag('capture-all-dns', undefined, 'bool', 'capture all port-53 traffic, not only to resolv.conf nameservers'),
  flag('drop-invalid', undefined, 'bool', 'drop conntrack-INVALID packets (default $INVALID_DROP)', ['INVALID_DROP']),
  flag('dual-stack', undefined, 'bool', 'IPv6 rules whenever the pod has an IPv6 address', ['ISTIO_DUAL_STACK', 'ISTIO_AGENT_DUAL_STACK']),
  flag('network-namespace', undefined, 'string', 'apply inside this network namespace (path)'),
  flag('cni-mode', undefined, 'bool', 'accepted for compatibility'),
  flag('reconcile', undefined, 'bool', 'replace existing Istio rules before applying (default true)'),
  flag('cleanup-only', undefined, 'bool', 'remove Istio chains, jumps, ip rules; apply nothing'),
  flag('force-apply', undefined, 'bool', 'accepted for compatibility (rules are always applied)'),
  flag('force-legacy-iptables', undefined, 'bool', 'use iptables-legacy instead of detecting the backend'),
  flag('ipv6', undefined, 'bool', 'IPv6 rules on/off (default: detected from the pod addresses)', ['ENABLE_INBOUND_IPV6']),
  flag('resolv-conf', undefined, 'string', 'resolv.conf read for DNS nameservers (default /etc/resolv.conf)'),
  flag('help', 'h', 'bool', 'show this help'),
];

/** Options that have no flag, only an env var (as in Istio). */
export const ENV = {
  OWNER_GROUPS_INCLUDE: 'ISTIO_OUTBOUND_OWNER_GROUPS',
  OWNER_GROUPS_EXCLUDE: 'ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE',
  IPV4_LOOPBACK_CIDR: 'ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR',
  ENVOY_USER: 'ENVOY_USER',
} as const;

export type FlagName = (typeof FLAGS)[number]['long'];

/** The flags given on the command line (long name -> raw value; booleans as "true"/"false"). */
export type ParsedArgs = ReadonlyMap<string, string>;

const BY_LONG = new Map(FLAGS.map((f) => [f.long, f]));
const BY_SHORT = new Map(FLAGS.filter((f) => f.short !== undefined).map((f) => [f.short!, f]));

function bad(message: string): IptablesError {
  return new IptablesError('ERR_IPTABLES_FLAGS', message);
}

/** Parses argv (without node and script); throws ERR_IPTABLES_FLAGS on anything unknown. */
export function parseArgs(argv: readonly string[]): ParsedArgs {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    let spec: FlagSpec | undefined;
    let inline: string | undefined;
    let shown = arg;
    if (arg.startsWith('--') && arg.length > 2) {
      const eq = arg.indexOf('=');
      const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
      shown = `--${name}`;
      spec = BY_LONG.get(name);
      if (eq >= 0) inline = arg.slice(eq + 1);
    } else if (arg.startsWith('-') && arg.length > 1 && arg !== '--') {
      shown = arg.slice(0, 2);
      spec = BY_SHORT.get(arg.charAt(1));
      if (arg.length > 2) inline = arg.charAt(2) === '=' ? arg.slice(3) : arg.slice(2);
    } else {
      throw bad(`unexpected argument ${JSON.stringify(arg)} (istio-iptables takes only flags)`);
    }
    if (spec === undefined) throw bad(`unknown flag ${shown}`);
    if (spec.kind === 'bool') {
      const v = inline ?? 'true';
      if (!['true', 'false', '1', '0'].includes(v.toLowerCase())) {
        throw bad(`${shown} takes true or false, got ${JSON.stringify(v)}`);
      }
      out.set(spec.long, v.toLowerCase() === 'true' || v === '1' ? 'true' : 'false');
      continue;
    }
    if (inline === undefined) {
      const next = argv[i + 1];
      if (next === undefined) throw bad(`${shown} needs a value`);
      inline = next;
      i++;
    }
    out.set(spec.long, inline);
  }
  return out;
}

/**
 * The effective raw value of an option: flag, then its env vars, else undefined.
 * An empty env var counts as unset (an empty flag value is kept: `-b ""` means "no ports").
 */
export function lookup(args: ParsedArgs, env: Readonly<Record<string, string | undefined>>, long: FlagName): string | undefined {
  if (args.has(long)) return args.get(long);
  const spec = BY_LONG.get(long)!;
  for (const name of spec.env) {
    const v = env[name];
    if (v !== undefined && v !== '') return v;
  }
  return undefined;
}

/** Names of the env vars an option reads (for error messages). */
export function sourcesOf(long: FlagName): string {
  const spec = BY_LONG.get(long)!;
  return [`--${long}`, ...spec.env].join(' / ');
}

export function usage(): string {
  const lines = ['Usage: istio-iptables [flags]', '', 'Sets up Istio sidecar traffic capture with iptables.', '', 'Flags:'];
  for (const f of FLAGS) {
    const names = `${f.short !== undefined ? `-${f.short}, ` : '    '}--${f.long}${f.kind === 'string' ? ' string' : ''}`;
    lines.push(`  ${names.padEnd(48)} ${f.help} [env ${f.env.join(', ')}]`);
  }
  lines.push('', `Env only: ${Object.values(ENV).join(', ')}`);
  return lines.join('\n') + '\n';
}
