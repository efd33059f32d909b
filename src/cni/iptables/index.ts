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
