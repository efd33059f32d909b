/**
 * Removing Istio's capture rules from a pod's network namespace (pure part): from the
 * `iptables-save` text of the namespace, the `iptables-restore --noflush` input that deletes
 * every rule Istio put in a built-in chain, then flushes and deletes every ISTIO_* chain.
 * Istio's rules in built-in chains are the jumps to ISTIO_* chains and, for TPROXY, the mangle
 * rules that set or restore the proxy marks. A pod's namespace holds no other MARK/CONNMARK rules
 * of ours or of the runtime's, so those are taken as Istio's.
 */

const BUILT_IN = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

function isIstioBuiltInRule(table: string, spec: string): boolean {
  if (/ -j ISTIO_[A-Z0-9_]+( |$)/.test(spec) || / -g ISTIO_[A-Z0-9_]+( |$)/.test(spec)) return true;
  if (table !== 'mangle') return false;
  return / -j (CONNMARK|MARK)( |$)/.test(spec) || (/ -m mark --mark /.test(spec) && / -j RETURN( |$)/.test(spec));
}

/** "" when the namespace holds no Istio rules. */
export function cleanupRestoreInput(save: string): string {
  const out: string[] = [];
  let table = '';
  let chains: string[] = [];
  let deletes: string[] = [];
  const flushTable = () => {
    if (table === '' || (chains.length === 0 && deletes.length === 0)) return;
    out.push(`*${table}`, ...deletes, ...chains.map((c) => `-F ${c}`), ...chains.map((c) => `-X ${c}`), 'COMMIT');
  };
  for (const line of save.split('\n')) {
    if (line.startsWith('*')) {
      table = line.slice(1).trim();
      chains = [];
      deletes = [];
    } else if (line.startsWith(':')) {
      const name = line.slice(1).split(' ')[0] ?? '';
      if (name.startsWith('ISTIO_')) chains.push(name);
    } else if (line.startsWith('-A ')) {
      const chain = line.split(' ')[1] ?? '';
      if (BUILT_IN.has(chain) && isIstioBuiltInRule(table, line)) deletes.push(`-D ${line.slice(3)}`);
    } else if (line.trim() === 'COMMIT') {
      flushTable();
      table = '';
    }
  }
  return out.length === 0 ? '' : out.join('\n') + '\n';
}
