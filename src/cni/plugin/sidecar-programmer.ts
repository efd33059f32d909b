/**
 * Programs a sidecar pod's redirection inside its network namespace: istio-iptables' rule
 * builder gives the restore input; this adapter removes any Istio rules already there (a repeated
 * ADD stays clean), feeds `iptables-restore --noflush` (and `ip6tables-restore`) through nsenter,
 * and for TPROXY adds the policy route that delivers marked packets locally. In dry-run it appends
 * the restore input to a file instead and touches nothing.
 */
import { appendFile, access } from 'node:fs/promises';
import { buildRestorePlan, type RestorePlan } from '../iptables/index.js';
import { ConfigError } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import { CniError } from './cni-error.js';
import { execInNetns, type ExecResult } from './netns-exec.js';
import { cleanupRestoreInput } from './rule-cleanup.js';
import type { SidecarRedirect } from './sidecar-redirect.js';

export interface SidecarProgramRequest {
  readonly netns: string;
  readonly podName: string;
  readonly podNamespace: string;
  readonly settings: SidecarRedirect;
  readonly enableIPv6: boolean;
}

/** What the plugin needs to put sidecar rules in place and take them away. */
export interface SidecarProgrammer {
  program(request: SidecarProgramRequest): Promise<void>;
  cleanup(netns: string): Promise<void>;
}

/** The restore plan for one sidecar pod (pure; ERR_CNI_REDIRECT_PARAMS if the builder refuses). */
export function sidecarPlan(settings: SidecarRedirect, enableIPv6: boolean): RestorePlan {
  try {
    return buildRestorePlan({
      proxyPort: settings.proxyPort,
      proxyUID: settings.proxyUID,
      proxyGID: settings.proxyGID,
      inboundInterceptionMode: settings.inboundInterceptionMode,
      outboundIPRangesInclude: settings.outboundIPRangesInclude,
      outboundIPRangesExclude: settings.outboundIPRangesExclude,
      inboundPortsInclude: settings.inboundPortsInclude,
      inboundPortsExclude: settings.inboundPortsExclude,
      outboundPortsInclude: settings.outboundPortsInclude,
      outboundPortsExclude: settings.outboundPortsExclude,
      rerouteVirtualInterfaces: settings.rerouteVirtualInterfaces,
      excludeInterfaces: settings.excludeInterfaces,
      redirectDNS: settings.redirectDNS,
      captureAllDNS: settings.captureAllDNS,
      dropInvalid: settings.dropInvalid,
      enableIPv6,
    });
  } catch (err) {
    if (err instanceof ConfigError) {
      throw new CniError('ERR_CNI_REDIRECT_PARAMS', `sidecar redirect settings rejected: ${err.problems.join('; ')}`);
    }
    throw err;
  }
}

export interface IptablesSidecarProgrammerOptions {
  readonly logger: Logger;
  /** When set: dry-run, the restore input is appended here and nothing is applied. */
  readonly dryRunFilePath?: string | undefined;
}

function failed(what: string, r: ExecResult): CniError {
  const reason = r.stderr.trim().split('\n').slice(-3).join(' | ').slice(0, 400);
  return new CniError('ERR_CNI_REDIRECT_FAILED', `${what} failed in the pod network namespace (exit ${r.code})`, { details: reason });
}

export class IptablesSidecarProgrammer implements SidecarProgrammer {
  readonly #log: Logger;
  readonly #dryRunFile: string | undefined;

  constructor(options: IptablesSidecarProgrammerOptions) {
    this.#log = options.logger;
    this.#dryRunFile = options.dryRunFilePath;
  }

  async program(request: SidecarProgramRequest): Promise<void> {
    const plan = sidecarPlan(request.settings, request.enableIPv6);
    if (this.#dryRunFile !== undefined) {
      await appendFile(this.#dryRunFile, plan.v4 + plan.v6);
      this.#log.info('dry-run: sidecar rules written, not applied', { file: this.#dryRunFile });
      return;
    }
    await this.#requireNetns(request.netns);
    await this.cleanup(request.netns);
    const families: Array<['iptables' | 'ip6tables', string, '-4' | '-6']> = [
      ['iptables', plan.v4, '-4'],
      ['ip6tables', plan.v6, '-6'],
    ];
    for (const [tool, text, flag] of families) {
      if (text === '') continue;
      const r = await execInNetns(`${tool}-restore`, ['--noflush'], { netns: request.netns, stdin: text });
      if (r.code !== 0) throw failed(`${tool}-restore`, r);
      if (plan.config.inboundInterceptionMode === 'TPROXY') {
        const mark = String(plan.config.inboundTProxyMark);
        const table = String(plan.config.inboundTProxyRouteTable);
        const rule = await execInNetns('ip', [flag, 'rule', 'add', 'fwmark', mark, 'lookup', table], { netns: request.netns });
        if (rule.code !== 0) throw failed('ip rule add', rule);
        const route = await execInNetns('ip', [flag, 'route', 'add', 'local', 'default', 'dev', 'lo', 'table', table], {
          netns: request.netns,
        });
        if (route.code !== 0) throw failed('ip route add', route);
      }
    }
    this.#log.info('sidecar redirection programmed', {
      pod: `${request.podNamespace}/${request.podName}`,
      mode: plan.config.inboundInterceptionMode,
      ipv6: request.enableIPv6,
    });
  }

  /** Removes Istio's rules (and the TPROXY policy route) from the namespace; a no-op when none. */
  async cleanup(netns: string): Promise<void> {
    if (this.#dryRunFile !== undefined) return;
    await this.#requireNetns(netns);
    for (const [tool, flag] of [['iptables', '-4'], ['ip6tables', '-6']] as const) {
      const save = await execInNetns(`${tool}-save`, [], { netns });
      if (save.code !== 0) {
        // ip6tables may be unusable where IPv6 is off; IPv4 must work.
        if (tool === 'iptables') throw failed('iptables-save', save);
        continue;
      }
      const input = cleanupRestoreInput(save.stdout);
      if (input !== '') {
        const r = await execInNetns(`${tool}-restore`, ['--noflush'], { netns, stdin: input });
        if (r.code !== 0) throw failed(`${tool}-restore (cleanup)`, r);
      }
      // Our TPROXY route: table and mark are Istio's defaults (the plugin never changes them).
      const rules = await execInNetns('ip', [flag, 'rule', 'show', 'table', '133'], { netns });
      if (rules.code === 0 && rules.stdout.trim() !== '') {
        await execInNetns('ip', [flag, 'rule', 'del', 'fwmark', '1337', 'lookup', '133'], { netns });
        await execInNetns('ip', [flag, 'route', 'flush', 'table', '133'], { netns });
      }
    }
  }

  async #requireNetns(netns: string): Promise<void> {
    try {
      await access(netns);
    } catch {
      throw new CniError('ERR_CNI_REDIRECT_FAILED', `network namespace ${netns} does not exist`);
    }
  }
}
