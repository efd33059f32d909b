/**
 * Upgrade or uninstall? When install-cni gets SIGTERM it must decide whether to take the
 * plugin off the node. During a rolling upgrade the DaemonSet still exists and still targets
 * this node, and a new install-cni pod follows: the plugin stays, so pods created in between
 * keep waiting for it instead of starting outside the mesh. When the DaemonSet is gone, being
 * deleted, or no longer selects this node, nothing will follow: clean up.
 *
 * Pure over the few fields read from the API (DaemonSet template scheduling, node labels).
 */
import { isSelectorOperator, requirementMatches, selectorMatches } from '../../core/label-selector.js';

export interface NodeSelectorRequirement {
  readonly key: string;
  readonly operator: string;
  readonly values?: readonly string[] | undefined;
}

export interface NodeSelectorTerm {
  readonly matchExpressions?: readonly NodeSelectorRequirement[] | undefined;
  readonly matchFields?: readonly NodeSelectorRequirement[] | undefined;
}

export interface DaemonSetFacts {
  readonly deletionTimestamp?: string | Date | undefined;
  readonly nodeSelector?: Readonly<Record<string, string>> | undefined;
  /** spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms */
  readonly requiredNodeSelectorTerms?: readonly NodeSelectorTerm[] | undefined;
}

export interface NodeFacts {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}

export type ShutdownDecision =
  | { readonly action: 'keep'; readonly reason: string }
  | { readonly action: 'uninstall'; readonly reason: string };

/** A node selector requirement: the label-selector operators, plus Gt/Lt on integer values. */
function matchRequirement(req: NodeSelectorRequirement, fields: Readonly<Record<string, string>>): boolean {
  const values = req.values ?? [];
  const { operator, key } = req;
  if (isSelectorOperator(operator)) return requirementMatches({ key, operator, values }, fields);
  if (operator !== 'Gt' && operator !== 'Lt') return false; // unknown operator: the scheduler would reject it too
  const bound = Number(values[0]);
  const n = Number(fields[key]);
  if (!Object.hasOwn(fields, key) || values.length !== 1 || !Number.isInteger(bound) || !Number.isInteger(n)) return false;
  return operator === 'Gt' ? n > bound : n < bound;
}

/** Whether the DaemonSet's pod template can be scheduled on the node (selector + required affinity). */
export function daemonSetTargetsNode(ds: DaemonSetFacts, node: NodeFacts): boolean {
  if (!selectorMatches({ matchLabels: ds.nodeSelector }, node.labels)) return false;
  const terms = ds.requiredNodeSelectorTerms ?? [];
  if (terms.length === 0) return true;
  const fields = { 'metadata.name': node.name };
  // Terms are ORed; the requirements inside one term are ANDed; an empty term matches nothing.
  return terms.some((t) => {
    const exprs = t.matchExpressions ?? [];
    const fieldReqs = t.matchFields ?? [];
    if (exprs.length === 0 && fieldReqs.length === 0) return false;
    return exprs.every((r) => matchRequirement(r, node.labels)) && fieldReqs.every((r) => matchRequirement(r, fields));
  });
}

function hasScheduling(ds: DaemonSetFacts): boolean {
  return Object.keys(ds.nodeSelector ?? {}).length > 0 || (ds.requiredNodeSelectorTerms ?? []).length > 0;
}

/**
 * The decision from what the API said. `daemonSet` undefined = not found (404); `node`
 * undefined = could not be read, in which case a DaemonSet with node scheduling constraints
 * is treated as still targeting us (keeping the plugin is the safe side: pods wait rather
 * than start outside the mesh).
 */
export function decideOnShutdown(facts: {
  readonly daemonSetName: string;
  readonly daemonSet: DaemonSetFacts | undefined;
  readonly node: NodeFacts | undefined;
}): ShutdownDecision {
  const { daemonSet: ds, daemonSetName: name } = facts;
  if (ds === undefined) return { action: 'uninstall', reason: `DaemonSet ${name} no longer exists` };
  if (ds.deletionTimestamp !== undefined && ds.deletionTimestamp !== null) {
    return { action: 'uninstall', reason: `DaemonSet ${name} is being deleted` };
  }
  if (facts.node === undefined) {
    return hasScheduling(ds)
      ? { action: 'keep', reason: `DaemonSet ${name} exists; node labels unreadable, assuming it still targets this node` }
      : { action: 'keep', reason: `DaemonSet ${name} exists and targets every node` };
  }
  if (!daemonSetTargetsNode(ds, facts.node)) {
    return { action: 'uninstall', reason: `DaemonSet ${name} no longer targets node ${facts.node.name}` };
  }
  return { action: 'keep', reason: `DaemonSet ${name} still targets node ${facts.node.name} (upgrade)` };
}
