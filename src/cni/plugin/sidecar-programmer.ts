/**
 * Programs a sidecar pod's redirection inside its network namespace with istio-iptables: the
 * rule builder gives the restore plan, the applier (through nsenter) removes Istio state already
 * there (a repeated ADD stays clean), runs `iptables-restore --noflush` and adds the TPROXY policy
 * route when needed. In dry-run the restore input is appended to a file and nothing is touched.
 */
// Synchronous file calls: no libuv thread pool in a process that lives for one ADD (kubeconfig.ts).
import { accessSync, appendFileSync } from 'node:fs';
// The builder and applier modules directly, not iptables/index.js: that also loads the
// istio-iptables CLI, which a plugin process (started once per pod) does not need.
import { buildRestorePlan, type RestorePlan } from '../iptables/plan.js';
import { resolveIptablesConfig } from '../iptables/config.js';
import { IptablesApplier } from '../iptables/applier.js';
import { IptablesError } from '../iptables/errors.js';
import { ConfigError } from '../../core/config.js';
import type { Logger } from '../../core/log.js';
import { CniError } from './cni-error.js';
import type { SidecarRedirect } from './sidecar-redirect.js';

export interface SidecarProgramRequest {
  readonly netns: string;
  readonly podName: string;
  readonly podNamespace: string;
  readonly settings: SidecarRedirect;
  readonly enableIPv6: boolean;
  /** Kills the iptables commands still running when it aborts (the ADD's budget). */
  readonly signal?: AbortSignal;
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

function failed(err: unknown): never {
  if (err instanceof IptablesError) {
    throw new CniError('ERR_CNI_REDIRECT_FAILED', 'programming redirection in the pod network namespace failed', {
      details: `${err.code}: ${err.message}`.slice(0, 500),
      cause: err,
    });
  }
  throw err;
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
      appendFileSync(this.#dryRunFile, plan.v4 + plan.v6);
      this.#log.info('dry-run: sidecar rules written, not applied', { file: this.#dryRunFile });
      return;
    }
    requireNetns(request.netns);
    const applier = new IptablesApplier({ netnsPath: request.netns, log: this.#log, ...(request.signal ? { signal: request.signal } : {}) });
    const report = await applier.apply(plan).catch(failed);
    this.#log.info('sidecar redirection programmed', {
      pod: `${request.podNamespace}/${request.podName}`,
      mode: plan.config.inboundInterceptionMode,
      backend: report.backend,
      families: report.families,
      reconciled: report.reconciled,
    });
  }

  /**
   * Removes Istio's rules from the namespace (a no-op when there are none). The pod's own
   * settings are unknown at DEL time: Istio's defaults with TPROXY name the marks and route
   * table, and every ISTIO_* chain and jump goes whatever the settings were.
   */
  async cleanup(netns: string): Promise<void> {
    if (this.#dryRunFile !== undefined) return;
    requireNetns(netns);
    const applier = new IptablesApplier({ netnsPath: netns, log: this.#log });
    await applier.cleanup(resolveIptablesConfig({ inboundInterceptionMode: 'TPROXY' })).catch(failed);
  }
}

function requireNetns(netns: string): void {
  try {
    accessSync(netns);
  } catch {
    throw new CniError('ERR_CNI_REDIRECT_FAILED', `network namespace ${netns} does not exist`);
  }
}
