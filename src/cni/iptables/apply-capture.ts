/**
 * One call for callers that just want a pod captured (the istio-cni plugin's sidecar path):
 * detect the pod's IP family in its netns (unless given), build the plan, apply it there.
 */
import type { Logger } from '../../core/log.js';
import { IptablesApplier, type ApplyReport } from './applier.js';
import type { IptablesSettings } from './config.js';
import { detectIPv6 } from './detect.js';
import { assertNetns, systemRunner, type CommandRunner } from './exec.js';
import { buildRestorePlan, type RestorePlan } from './plan.js';

export interface ApplyCaptureOptions {
  /** The pod's network namespace (e.g. CNI_NETNS). */
  readonly netnsPath: string;
  /** Build and return the plan without touching the system. */
  readonly dryRun?: boolean;
  /** Treat any IPv6 pod address as IPv6 (default false: IPv6 only when the pod has no IPv4). */
  readonly dualStack?: boolean;
  readonly runner?: CommandRunner;
  readonly log?: Logger;
}

export interface ApplyCaptureResult {
  readonly plan: RestorePlan;
  /** undefined in dry-run. */
  readonly report: ApplyReport | undefined;
}

/**
 * `settings.enableIPv6` wins when set; otherwise it is detected in the netns (no usable address
 * counts as IPv4).
 */
export async function applyCapture(settings: IptablesSettings, options: ApplyCaptureOptions): Promise<ApplyCaptureResult> {
  const runner = options.runner ?? systemRunner({ netnsPath: options.netnsPath });
  if (options.dryRun === true) {
    return { plan: buildRestorePlan({ ...settings, enableIPv6: settings.enableIPv6 ?? false }), report: undefined };
  }
  if (options.runner === undefined) await assertNetns(options.netnsPath);
  const applier = new IptablesApplier({ runner, ...(options.log === undefined ? {} : { log: options.log }) });
  // Backend detection and address detection are independent: run them together.
  const [detected] = await Promise.all([
    settings.enableIPv6 === undefined ? detectIPv6(runner, options.dualStack ?? false) : Promise.resolve(undefined),
    applier.binaries(),
  ]);
  const plan = buildRestorePlan({ ...settings, enableIPv6: settings.enableIPv6 ?? detected ?? false });
  return { plan, report: await applier.apply(plan) };
}
