/**
 * The applier (adapter): puts a `RestorePlan` into a network namespace and takes it out again.
 *
 *   apply:   detect the iptables backend; if Istio state is already there, clean it up first
 *            (so applying twice leaves exactly one copy); `iptables-restore --noflush` and
 *            `ip6tables-restore --noflush` with the plan on stdin; then the routes: `::6/128` on
 *            lo for IPv6, and for TPROXY `ip rule add fwmark <mark> lookup <table>` plus
 *            `ip route replace local default dev lo table <table>` (per family).
 *   cleanup: delete the plan's non-jump rules in built-in chains, every jump into ISTIO_*
 *            chains, the ISTIO_* chains themselves, the TPROXY ip rules and route table, and
 *            the ::6 address, in both families. Safe to run when nothing is installed.
 *
 * All system access goes through a `CommandRunner`; `systemRunner({ netnsPath })` runs every
 * command under `nsenter --net=<netnsPath>`.
 */
import { silentLogger, type Logger } from '../../core/log.js';
import { buildCaptureRules } from './capture.js';
import type { IptablesConfig } from './config.js';
import { binariesFor, detectIptablesMode, type IptablesBinaries, type IptablesMode } from './detect.js';
import { IptablesError } from './errors.js';
import { runChecked, systemRunner, type CommandRunner } from './exec.js';
import type { RestorePlan } from './plan.js';
import { isBuiltInChain, jumpTarget, type Family } from './rule-set.js';
import { cleanupRestore, hasIstioState, parseSave } from './saved-state.js';

export interface ApplierOptions {
  /** Network namespace to work in (ignored when `runner` is given). Default: the caller's. */
  readonly netnsPath?: string;
  /** How commands run; default `systemRunner({ netnsPath })`. */
  readonly runner?: CommandRunner;
  /** Backend: detect (default) or force one. */
  readonly mode?: IptablesMode | 'auto';
  readonly log?: Logger;
  /** With the default runner: kill running commands once this aborts. */
  readonly signal?: AbortSignal;
}

export interface ApplyReport {
  readonly backend: IptablesBinaries['mode'];
  /** Istio state was present and was removed before applying. */
  readonly reconciled: boolean;
  readonly families: readonly Family[];
  readonly tproxyRoutes: boolean;
}

export interface CleanupReport {
  readonly backend: IptablesBinaries['mode'];
  /** iptables-restore input that removed the ISTIO_* chains and jumps, per family. */
  readonly removed: Readonly<Record<Family, string>>;
  readonly ipRulesRemoved: number;
}

const FAMILIES: readonly Family[] = ['v4', 'v6'];

export class IptablesApplier {
  readonly #runner: CommandRunner;
  readonly #mode: IptablesMode | 'auto';
  readonly #log: Logger;
  #binaries: Promise<IptablesBinaries> | undefined;

  constructor(options: ApplierOptions = {}) {
    this.#runner =
      options.runner ??
      systemRunner({
        ...(options.netnsPath !== undefined ? { netnsPath: options.netnsPath } : {}),
        ...(options.signal !== undefined ? { signal: options.signal } : {}),
      });
    this.#mode = options.mode ?? 'auto';
    this.#log = options.log ?? silentLogger;
  }

  binaries(): Promise<IptablesBinaries> {
    this.#binaries ??= this.#mode === 'auto' ? detectIptablesMode(this.#runner) : Promise.resolve(binariesFor(this.#mode));
    return this.#binaries;
  }

  /** The current `iptables-save` (or `ip6tables-save`) output ("" when that family's tools are missing). */
  async save(family: Family): Promise<string> {
    const b = await this.binaries();
    if (!this.#runner.has(b.save[family])) return '';
    return (await runChecked(this.#runner, b.save[family], [])).stdout;
  }

  /**
   * Applies the plan. With `reconcile` (default), existing Istio state is removed first; without
   * it the rules are added on top of whatever is there (Istio's --reconcile=false).
   */
  async apply(plan: RestorePlan, options: { readonly reconcile?: boolean } = {}): Promise<ApplyReport> {
    const b = await this.binaries();
    const cfg = plan.config;
    const families: Family[] = cfg.enableIPv6 ? ['v4', 'v6'] : ['v4'];
    let reconciled = false;
    if (options.reconcile !== false) {
      const saves = await Promise.all(FAMILIES.map((f) => this.save(f)));
      reconciled = saves.some((text) => hasIstioState(parseSave(text)));
    }
    if (reconciled) {
      this.#log.info('istio iptables state found; removing it before applying', { backend: b.mode });
      await this.cleanup(cfg);
    }
    for (const f of families) {
      const text = f === 'v4' ? plan.v4 : plan.v6;
      if (text === '') continue;
      this.#log.debug('iptables-restore input', { family: f, input: text });
      await runChecked(this.#runner, b.restore[f], b.restoreArgs, text);
    }
    if (cfg.enableIPv6) await this.#ip(['-6', 'addr', 'add', '::6/128', 'dev', 'lo'], /File exists/);
    const tproxyRoutes =
      cfg.inboundInterceptionMode === 'TPROXY' && (cfg.inboundPortsInclude === '*' || cfg.inboundPortsInclude.length > 0);
    if (tproxyRoutes) {
      for (const f of families) await this.#addTproxyRoute(f, cfg);
    }
    this.#log.info('istio iptables applied', { backend: b.mode, families, reconciled, tproxyRoutes });
    return { backend: b.mode, reconciled, families, tproxyRoutes };
  }

  /** Removes everything `apply` installs. `cfg` names the TPROXY mark/table and the non-jump rules. */
  async cleanup(cfg: IptablesConfig): Promise<CleanupReport> {
    const b = await this.binaries();
    // Undo with IPv6 on, so v6 leftovers of an earlier IPv6 apply go too.
    const rules = buildCaptureRules({ ...cfg, enableIPv6: true });
    const removed: Record<Family, string> = { v4: '', v6: '' };
    for (const f of FAMILIES) {
      if (!this.#runner.has(b.iptables[f]) || !this.#runner.has(b.restore[f])) continue;
      for (const r of rules.rules(f)) {
        const target = jumpTarget(r.args);
        if (!isBuiltInChain(r.chain) || (target !== undefined && target.startsWith('ISTIO_'))) continue;
        const params = r.args[0] === '-I' ? r.args.slice(3) : r.args.slice(2);
        // Delete every copy; a rule that is not there makes iptables exit non-zero.
        for (let i = 0; i < 16; i++) {
          const res = await this.#runner.run(b.iptables[f], ['-t', r.table, '-D', r.chain, ...params]);
          if (res.code !== 0) break;
        }
      }
      const text = cleanupRestore(parseSave(await this.save(f)));
      if (text !== '') await runChecked(this.#runner, b.restore[f], b.restoreArgs, text);
      removed[f] = text;
    }
    const [n4, n6] = await Promise.all([
      this.#removeTproxyRoute('v4', cfg),
      this.#removeTproxyRoute('v6', cfg),
      this.#ip(['-6', 'addr', 'del', '::6/128', 'dev', 'lo'], /./),
    ]);
    const ipRulesRemoved = n4 + n6;
    this.#log.info('istio iptables cleaned up', { backend: b.mode, ipRulesRemoved });
    return { backend: b.mode, removed, ipRulesRemoved };
  }

  async #addTproxyRoute(f: Family, cfg: IptablesConfig): Promise<void> {
    const fam = f === 'v6' ? ['-6'] : ['-4'];
    const mark = String(cfg.inboundTProxyMark);
    const table = String(cfg.inboundTProxyRouteTable);
    if ((await this.#countTproxyRules(f, cfg)) === 0) {
      await runChecked(this.#runner, 'ip', [...fam, 'rule', 'add', 'fwmark', mark, 'lookup', table]);
    }
    const dst = f === 'v6' ? '::/0' : '0.0.0.0/0';
    await runChecked(this.#runner, 'ip', [...fam, 'route', 'replace', 'local', dst, 'dev', 'lo', 'table', table]);
  }

  async #countTproxyRules(f: Family, cfg: IptablesConfig): Promise<number> {
    const r = await this.#runner.run('ip', [f === 'v6' ? '-6' : '-4', 'rule', 'show']);
    if (r.code !== 0) return 0;
    const mark = `0x${cfg.inboundTProxyMark.toString(16)}`;
    const re = new RegExp(`fwmark (${mark}|${cfg.inboundTProxyMark})\\s+lookup ${cfg.inboundTProxyRouteTable}\\b`);
    return r.stdout.split('\n').filter((l) => re.test(l)).length;
  }

  async #removeTproxyRoute(f: Family, cfg: IptablesConfig): Promise<number> {
    const fam = f === 'v6' ? '-6' : '-4';
    let n = 0;
    for (let left = await this.#countTproxyRules(f, cfg); left > 0; left--) {
      const r = await this.#runner.run('ip', [fam, 'rule', 'del', 'fwmark', String(cfg.inboundTProxyMark), 'lookup',
        String(cfg.inboundTProxyRouteTable)]);
      if (r.code !== 0) break;
      n++;
    }
    // An empty table makes `ip route flush` complain; that is fine.
    await this.#runner.run('ip', [fam, 'route', 'flush', 'table', String(cfg.inboundTProxyRouteTable)]);
    return n;
  }

  async #ip(args: string[], tolerated: RegExp): Promise<void> {
    const r = await this.#runner.run('ip', args);
    if (r.code !== 0 && !tolerated.test(r.stderr)) {
      throw new IptablesError('ERR_IPTABLES_COMMAND', `ip ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
    }
  }
}
