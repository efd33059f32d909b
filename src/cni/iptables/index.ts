/**
 * istio-iptables: Istio's sidecar traffic-capture rules, built and applied.
 *
 * Builder (pure, no I/O):
 *   - `resolveIptablesConfig(settings)` validates Istio-named settings into a frozen config
 *     (throws a core `ConfigError` listing every problem).
 *   - `buildRestorePlan(settings | config)` gives `{ v4, v6 }`: the `iptables-restore` /
 *     `ip6tables-restore` input, byte for byte as Istio's istio-iptables produces it.
 *   - `istioDryRunTranscript(plan)` is what Istio's dry-run stub records for the same run.
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

/*
 * Applier (adapter; child processes, optionally inside a netns via nsenter):
 *   - `new IptablesApplier({ netnsPath })` then `apply(plan)` / `cleanup(config)`.
 *   - `systemRunner({ netnsPath })`, `detectIPv6(runner, dualStack)`, `detectIptablesMode(runner)`.
 */
export { IptablesApplier } from './applier.js';
export type { ApplierOptions, ApplyReport, CleanupReport } from './applier.js';
export { systemRunner, findBinary } from './exec.js';
export type { CommandRunner, CommandResult, SystemRunnerOptions } from './exec.js';
export { detectIPv6, detectIptablesMode, binariesFor, parseIpAddr, ipv6FromAddresses } from './detect.js';
export type { IptablesMode, IptablesBinaries, InterfaceAddress } from './detect.js';
export { parseSave, cleanupRestore, hasIstioState, istioLines } from './saved-state.js';
export type { SavedTable } from './saved-state.js';
