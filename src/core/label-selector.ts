/**
 * Kubernetes label-selector matching (pure), the one copy for every part that matches labels:
 * the CNI plugin's ambient enablement selectors, install-cni's reading of a DaemonSet's node
 * scheduling, and the devcluster's `labelSelector` query parameter (whose `a=b` / `a!=b` are
 * In / NotIn with one value, as in Kubernetes). Parsing and validating a selector is its user's
 * business; this file only answers "does it match".
 *
 * Semantics (metav1.LabelSelector): every matchLabels pair and every requirement must hold; an
 * empty selector matches everything. `In` needs the key present with one of the values; `NotIn`
 * holds when the key is absent or its value is none of them; `Exists` / `DoesNotExist` look at
 * the key only (an empty value is still present).
 */

export type Labels = Readonly<Record<string, string>>;

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export interface LabelSelectorRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values: readonly string[];
}

export interface LabelSelector {
  readonly matchLabels?: Labels | undefined;
  readonly matchExpressions?: readonly LabelSelectorRequirement[] | undefined;
}

export function isSelectorOperator(op: string): op is SelectorOperator {
  return op === 'In' || op === 'NotIn' || op === 'Exists' || op === 'DoesNotExist';
}

export function requirementMatches(req: LabelSelectorRequirement, labels: Labels): boolean {
  const has = Object.hasOwn(labels, req.key);
  switch (req.operator) {
    case 'In':
      return has && req.values.includes(labels[req.key]!);
    case 'NotIn':
      return !has || !req.values.includes(labels[req.key]!);
    case 'Exists':
      return has;
    case 'DoesNotExist':
      return !has;
  }
}

export function selectorMatches(selector: LabelSelector, labels: Labels | undefined): boolean {
  const l = labels ?? {};
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!Object.hasOwn(l, key) || l[key] !== value) return false;
  }
  return (selector.matchExpressions ?? []).every((req) => requirementMatches(req, l));
}
