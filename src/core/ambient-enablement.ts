/**
 * Which pods are ambient: Istio's enablement selectors (pure; shared by the CNI plugin and the node
 * broker, which decides for the plugin's one-round-trip ADD). A selector pairs a pod label
 * selector with a namespace label selector; a pod is ambient when some pair matches both its own
 * labels and its namespace's labels. Host-network pods and pods that already have a sidecar
 * (annotation `sidecar.istio.io/status`) never are.
 */
import { isSelectorOperator, selectorMatches, type LabelSelector, type LabelSelectorRequirement, type Labels } from './label-selector.js';

export type { LabelSelector } from './label-selector.js';

/** Raises a decoding problem in the caller's own error (the plugin's config error, the broker's 400). */
export type SelectorProblem = (message: string) => never;

export interface EnablementSelector {
  readonly podSelector: LabelSelector;
  readonly namespaceSelector: LabelSelector;
}

export const DATAPLANE_MODE_LABEL = 'istio.io/dataplane-mode';
export const SIDECAR_STATUS_ANNOTATION = 'sidecar.istio.io/status';

const EVERYTHING: LabelSelector = Object.freeze({ matchLabels: {}, matchExpressions: [] });

/**
 * Istio's default selectors (its Helm values): a pod labelled ambient, or a pod in a namespace
 * labelled ambient unless the pod itself says `none`. Used when the config gives none.
 */
const DEFAULTS: EnablementSelector[] = [
  { podSelector: { matchLabels: { [DATAPLANE_MODE_LABEL]: 'ambient' }, matchExpressions: [] }, namespaceSelector: EVERYTHING },
  {
    podSelector: { matchLabels: {}, matchExpressions: [{ key: DATAPLANE_MODE_LABEL, operator: 'NotIn', values: ['none'] }] },
    namespaceSelector: { matchLabels: { [DATAPLANE_MODE_LABEL]: 'ambient' }, matchExpressions: [] },
  },
];
export const DEFAULT_ENABLEMENT_SELECTORS: readonly EnablementSelector[] = Object.freeze(DEFAULTS);

export interface AmbientCandidate {
  readonly podLabels: Labels;
  readonly podAnnotations: Labels;
  readonly hostNetwork: boolean;
  readonly namespaceLabels: Labels;
}

export function isAmbientPod(pod: AmbientCandidate, selectors: readonly EnablementSelector[]): boolean {
  if (pod.hostNetwork) return false;
  if (Object.prototype.hasOwnProperty.call(pod.podAnnotations, SIDECAR_STATUS_ANNOTATION)) return false;
  return selectors.some(
    (s) => selectorMatches(s.podSelector, pod.podLabels) && selectorMatches(s.namespaceSelector, pod.namespaceLabels),
  );
}

// ---- decoding selectors from the plugin config (JSON as Kubernetes writes LabelSelector) ----

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function decodeLabelSelector(raw: unknown, where: string, fail: SelectorProblem): LabelSelector {
  if (raw === undefined || raw === null) return EVERYTHING;
  if (!isObject(raw)) fail(`${where} is not an object`);
  const matchLabels: Record<string, string> = {};
  if (raw.matchLabels !== undefined && raw.matchLabels !== null) {
    if (!isObject(raw.matchLabels)) fail(`${where}.matchLabels is not an object`);
    for (const [k, v] of Object.entries(raw.matchLabels)) {
      if (typeof v !== 'string') fail(`${where}.matchLabels[${JSON.stringify(k)}] is not a string`);
      matchLabels[k] = v;
    }
  }
  const matchExpressions: LabelSelectorRequirement[] = [];
  if (raw.matchExpressions !== undefined && raw.matchExpressions !== null) {
    if (!Array.isArray(raw.matchExpressions)) fail(`${where}.matchExpressions is not an array`);
    raw.matchExpressions.forEach((e: unknown, i: number) => {
      const at = `${where}.matchExpressions[${i}]`;
      if (!isObject(e) || typeof e.key !== 'string' || typeof e.operator !== 'string') {
        fail(`${at} needs string key and operator`);
      }
      const op = e.operator;
      if (!isSelectorOperator(op)) {
        fail(`${at}.operator ${JSON.stringify(op)} is not In|NotIn|Exists|DoesNotExist`);
      }
      const values = e.values === undefined || e.values === null ? [] : e.values;
      if (!Array.isArray(values) || !values.every((v) => typeof v === 'string')) {
        fail(`${at}.values is not an array of strings`);
      }
      if ((op === 'In' || op === 'NotIn') && values.length === 0) {
        fail(`${at}: operator ${op} needs at least one value`);
      }
      if ((op === 'Exists' || op === 'DoesNotExist') && values.length > 0) {
        fail(`${at}: operator ${op} takes no values`);
      }
      matchExpressions.push({ key: e.key, operator: op, values: values as string[] });
    });
  }
  return { matchLabels, matchExpressions };
}

/** `enablement_selectors` from the config; null, absent or empty -> Istio's defaults. */
export function decodeEnablementSelectors(raw: unknown, fail: SelectorProblem): readonly EnablementSelector[] {
  if (raw === undefined || raw === null) return DEFAULT_ENABLEMENT_SELECTORS;
  if (!Array.isArray(raw)) fail('enablement_selectors is not an array');
  if (raw.length === 0) return DEFAULT_ENABLEMENT_SELECTORS;
  return raw.map((s: unknown, i: number) => {
    if (!isObject(s)) fail(`enablement_selectors[${i}] is not an object`);
    return {
      podSelector: decodeLabelSelector(s.podSelector, `enablement_selectors[${i}].podSelector`, fail),
      namespaceSelector: decodeLabelSelector(s.namespaceSelector, `enablement_selectors[${i}].namespaceSelector`, fail),
    };
  });
}
