/**
 * An ordered list of iptables commands per IP family, rendered as `iptables-restore` input the
 * way Istio renders it: tables in alphabetical order (filter, mangle, nat, raw), each with
 * `-N` for every non-built-in chain (first the chains that receive rules, in order of first
 * use, then chains that are only jumped to), then the `-A`/`-I` commands in the order they
 * were added, then `COMMIT`. Pure.
 */

export type Table = 'filter' | 'mangle' | 'nat' | 'raw';
export type Family = 'v4' | 'v6';

export const TABLES: readonly Table[] = ['filter', 'mangle', 'nat', 'raw'];

/** Built-in chains and targets: never created with -N. */
const BUILT_IN = new Set(['INPUT', 'OUTPUT', 'FORWARD', 'PREROUTING', 'POSTROUTING', 'ACCEPT', 'RETURN', 'DROP']);

export function isBuiltInChain(chain: string): boolean {
  return BUILT_IN.has(chain);
}

export interface Rule {
  readonly table: Table;
  readonly chain: string;
  /** `-A CHAIN ...` or `-I CHAIN N ...`. */
  readonly args: readonly string[];
}

/** Stands for the family-specific address in `appendVersioned`. */
export const IP_PLACEHOLDER = '\u0000ip';

export class RuleSet {
  readonly #rules: Record<Family, Rule[]> = { v4: [], v6: [] };
  readonly #ipv6: boolean;

  /** With `ipv6: false`, every v6 operation is a no-op (as Istio's builder). */
  constructor(options: { readonly ipv6: boolean }) {
    this.#ipv6 = options.ipv6;
  }

  #add(family: Family, rule: Rule): this {
    if (family === 'v6' && !this.#ipv6) return this;
    this.#rules[family].push(rule);
    return this;
  }

  appendV4(table: Table, chain: string, ...params: string[]): this {
    return this.#add('v4', { table, chain, args: ['-A', chain, ...params] });
  }

  appendV6(table: Table, chain: string, ...params: string[]): this {
    return this.#add('v6', { table, chain, args: ['-A', chain, ...params] });
  }

  append(table: Table, chain: string, ...params: string[]): this {
    return this.appendV4(table, chain, ...params).appendV6(table, chain, ...params);
  }

  insertV4(table: Table, chain: string, position: number, ...params: string[]): this {
    return this.#add('v4', { table, chain, args: ['-I', chain, String(position), ...params] });
  }

  insertV6(table: Table, chain: string, position: number, ...params: string[]): this {
    return this.#add('v6', { table, chain, args: ['-I', chain, String(position), ...params] });
  }

  insert(table: Table, chain: string, position: number, ...params: string[]): this {
    return this.insertV4(table, chain, position, ...params).insertV6(table, chain, position, ...params);
  }

  /** Appends to both families, replacing IP_PLACEHOLDER with the family's address. */
  appendVersioned(table: Table, chain: string, addr: { readonly v4: string; readonly v6: string }, ...params: string[]): this {
    const sub = (a: string) => params.map((x) => (x === IP_PLACEHOLDER ? a : x));
    return this.appendV4(table, chain, ...sub(addr.v4)).appendV6(table, chain, ...sub(addr.v6));
  }

  rules(family: Family): readonly Rule[] {
    return this.#rules[family];
  }

  /** The iptables-restore input for one family ("" when it has no rules). */
  restore(family: Family): string {
    const rules = this.#rules[family];
    const lines = new Map<Table, string[]>(TABLES.map((t) => [t, []]));
    const created = new Set<string>();
    const create = (table: Table, chain: string) => {
      const key = `${table}:${chain}`;
      if (created.has(key)) return;
      created.add(key);
      if (!isBuiltInChain(chain)) lines.get(table)!.push(`-N ${chain}`);
    };
    for (const r of rules) create(r.table, r.chain);
    for (const r of rules) {
      const jump = jumpTarget(r.args);
      if (jump !== undefined) create(r.table, jump);
    }
    for (const r of rules) lines.get(r.table)!.push(r.args.join(' '));
    let out = '';
    for (const t of TABLES) {
      const body = lines.get(t)!;
      if (body.length === 0) continue;
      out += `* ${t}\n${body.join('\n')}\n`;
      out += 'COMMIT\n';
    }
    return out;
  }
}

/** The chain a rule jumps to when `-j X` ends the rule (targets with options are not chains). */
export function jumpTarget(args: readonly string[]): string | undefined {
  return args.length >= 2 && args[args.length - 2] === '-j' ? args[args.length - 1] : undefined;
}
