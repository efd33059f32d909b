/**
 * istio-iptables: Istio's sidecar traffic-capture rules, built and applied.
 *
 * Builder (pure, no I/O) — what the istio-cni plugin's dry-run and goldens use:
 *   - `resolveIptablesConfig(settings)`: Istio-named settings (proxyPort, inboundCapturePort,
 *     proxyUID, inboundInterceptionMode, inboundPortsInclude, outboundIPRangesInclude, ...; Istio's
 *     string forms or typed values) -> frozen `IptablesConfig`, or a core `ConfigError` listing
 *     every problem.
 *   - `buildRestorePlan(settings | config)` -> `{ config, v4, v6 }`: the `iptables-restore` and
 *     `ip6tables-restore` input, byte for byte as Istio's istio-iptables produces it ("" for v6
 *     unless enableIPv6).
 *   - `istioDryRunTranscript(plan)`: what Istio's dry-run stub records for the same run.
 *
 * Applier (adapter; child processes, each wrapped in `nsenter --net=<netnsPath>` when given):
 *   - `applyCapture(settings, { netnsPath, dryRun? })`: detect IPv6 in the pod netns (unless
 *     settings.enableIPv6 is set), build, apply. Returns `{ plan, report }`.
 *   - `new IptablesApplier({ netnsPath, mode? })` with `apply(plan)` (idempotent: existing Istio
 *     state is replaced) and `cleanup(config)` (ISTIO_* chains and jumps, TPROXY ip rules, ::6).
 *   - `detectIPv6(systemRunner({ netnsPath }), dualStack)`, `detectIptablesMode(runner)`.
 *
 * CLI: `runIstioIptables(argv, env, io)` -> exit code (0 ok, 1 failed, 2 bad flags or values,
 * 126 validation failed); used by main.ts (standalone executable) and `certbroker istio-iptables`.
 *
 * Errors: `IptablesError` with `ERR_IPTABLES_*` codes; bad configuration is `ConfigError`.
 */
export { resolveIptablesConfig, splitList, DEFAULT_PROXY_UID } from './config.js';
export type { IptablesSettings, IptablesConfig, InterceptionMode, OwnerGroupFilter, ListLike } from './config.js';
export { buildRestorePlan, istioDryRunTranscript } from './plan.js';
export type { RestorePlan } from './plan.js';
export { buildCaptureRules, CHAIN } from './capture.js';
export { RuleSet } from './rule-set.js';
export type { Rule, Table, Family } from './rule-set.js';
export { parseCidr, ipFamily } from './addresses.js';
export type { Cidr, IpFamily } from './addresses.js';
export { IptablesError } from './errors.js';
export type { IptablesErrorCode } from './errors.js';

export { applyCapture } from './apply-capture.js';
export type { ApplyCaptureOptions, ApplyCaptureResult } from './apply-capture.js';
export { IptablesApplier } from './applier.js';
export type { ApplierOptions, ApplyReport, CleanupReport } from './applier.js';
export { systemRunner, findBinary, assertNetns } from './exec.js';
export type { CommandRunner, CommandResult, SystemRunnerOptions } from './exec.js';
export { detectIPv6, detectIptablesMode, binariesFor, parseIpAddr, ipv6FromAddresses } from './detect.js';
export type { IptablesMode, IptablesBinaries, InterfaceAddress } from './detect.js';
export { parseSave, cleanupRestore, hasIstioState, istioLines } from './saved-state.js';
export type { SavedTable } from './saved-state.js';

export { runIstioIptables, EXIT } from './run.js';
export { parseResolvConf } from './resolv-conf.js';
export type { Nameservers } from './resolv-conf.js';
export { runValidation } from './validation.js';
export type { ValidationOptions, ValidationResult } from './validation.js';
