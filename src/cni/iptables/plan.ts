/**
 * The restore plan: what the applier feeds to `iptables-restore --noflush` and
 * `ip6tables-restore --noflush`, plus the transcript Istio's dry-run dependency stub records for
 * the same run (used by the conformance tests and by `--dry-run`). Pure.
 */
import { buildCaptureRules } from './capture.js';
import { resolveIptablesConfig, type IptablesConfig, type IptablesSettings } from './config.js';
import type { RuleSet } from './rule-set.js';

export interface RestorePlan {
  readonly config: IptablesConfig;
  /** iptables-restore input ("" when there is nothing to apply). */
  readonly v4: string;
  /** ip6tables-restore input; always "" when IPv6 is disabled. */
  readonly v6: string;
  /** The ordered rules behind the text (cleanup uses them to undo rules in built-in chains). */
  readonly rules: RuleSet;
}

function isConfig(x: IptablesSettings | IptablesConfig): x is IptablesConfig {
  return Object.isFrozen(x) && 'ownerGroups' in x;
}

/** Builds the restore inputs from settings (validated here) or an already-resolved config. */
export function buildRestorePlan(input: IptablesSettings | IptablesConfig): RestorePlan {
  const config = isConfig(input) ? input : resolveIptablesConfig(input);
  const rules = buildCaptureRules(config);
  return Object.freeze({ config, v4: rules.restore('v4'), v6: rules.restore('v6'), rules });
}

/**
 * What Istio's dry-run stub records for one apply: the state check (`iptables-save`,
 * `ip6tables-save`), the stdin of iptables-restore and of ip6tables-restore, then the final
 * state dump (`ip6tables-save` only with IPv6 enabled).
 */
export function istioDryRunTranscript(plan: RestorePlan): string {
  return (
    'iptables-save\nip6tables-save\n' +
    plan.v4 +
    plan.v6 +
    'iptables-save\n' +
    (plan.config.enableIPv6 ? 'ip6tables-save\n' : '')
  );
}
