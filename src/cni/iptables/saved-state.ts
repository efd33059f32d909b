/**
 * Reading `iptables-save` output and planning the removal of Istio's rules from it. Pure.
 *
 * Cleanup works from the live state rather than from a remembered rule list: every rule in a
 * non-Istio chain that jumps to an ISTIO_* chain is deleted (using the saved line itself, so
 * the kernel's canonical form always matches), then every ISTIO_* chain is flushed and deleted.
 * Rules Istio adds to built-in chains without jumping to an ISTIO_* chain (interface RETURNs,
 * TPROXY marks) are removed separately from the rule plan (see the applier).
 */
import type { Table } from './rule-set.js';

export interface SavedTable {
  readonly table: string;
  /** Chains declared with `:NAME POLICY [counters]`. */
  readonly chains: readonly string[];
  /** `-A CHAIN ...` lines as saved. */
  readonly rules: readonly string[];
}

export function parseSave(text: string): SavedTable[] {
  const tables: { table: string; chains: string[]; rules: string[] }[] = [];
  let cur: { table: string; chains: string[]; rules: string[] } | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      cur = { table: line.slice(1).trim(), chains: [], rules: [] };
      tables.push(cur);
    } else if (line === 'COMMIT') {
      cur = undefined;
    } else if (cur !== undefined && line.startsWith(':')) {
      const name = line.slice(1).split(/\s+/)[0];
      if (name !== undefined && name !== '') cur.chains.push(name);
    } else if (cur !== undefined && line.startsWith('-A ')) {
      cur.rules.push(line);
    }
  }
  return tables;
}

const ISTIO = /^ISTIO_/;

function ruleChain(rule: string): string {
  return rule.split(/\s+/)[1] ?? '';
}

function ruleJump(rule: string): string | undefined {
  const m = /\s-j\s+(\S+)/.exec(` ${rule}`);
  return m?.[1];
}

/** True when the saved state holds any Istio chain or any jump to one. */
export function hasIstioState(tables: readonly SavedTable[]): boolean {
  return tables.some(
    (t) => t.chains.some((c) => ISTIO.test(c)) || t.rules.some((r) => ISTIO.test(ruleJump(r) ?? '')),
  );
}

/** Lines of the saved state that belong to Istio (its chains and the rules that jump to them). */
export function istioLines(tables: readonly SavedTable[]): string[] {
  const out: string[] = [];
  for (const t of tables) {
    for (const c of t.chains) if (ISTIO.test(c)) out.push(`${t.table} :${c}`);
    for (const r of t.rules) if (ISTIO.test(ruleChain(r)) || ISTIO.test(ruleJump(r) ?? '')) out.push(`${t.table} ${r}`);
  }
  return out;
}

/**
 * TPROXY mode's "proxy -> app over lo" marking (mark 1338, a constant of Istio's) in mangle
 * OUTPUT, whatever the proxy uid/gid: recognisable without knowing the pod's settings.
 */
const OUTBOUND_MARK_RULE = /^-A OUTPUT .*-o lo .*-m owner --[ug]id-owner \S+ -j MARK --set-xmark 0x53a\/0xffffffff$/;

/**
 * iptables-restore (--noflush) input removing every jump into ISTIO_* chains from other chains
 * (and TPROXY's outbound-mark rules), then flushing and deleting the ISTIO_* chains; "" when
 * there is nothing to remove.
 */
export function cleanupRestore(tables: readonly SavedTable[]): string {
  let out = '';
  for (const t of tables) {
    const chains = t.chains.filter((c) => ISTIO.test(c));
    const jumps = t.rules.filter(
      (r) =>
        !ISTIO.test(ruleChain(r)) &&
        (ISTIO.test(ruleJump(r) ?? '') || (t.table === 'mangle' && OUTBOUND_MARK_RULE.test(r))),
    );
    if (chains.length === 0 && jumps.length === 0) continue;
    out += `*${t.table}\n`;
    for (const r of jumps) out += `-D${r.slice(2)}\n`;
    for (const c of chains) out += `-F ${c}\n`;
    for (const c of chains) out += `-X ${c}\n`;
    out += 'COMMIT\n';
  }
  return out;
}
