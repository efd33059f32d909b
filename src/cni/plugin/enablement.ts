/**
 * Which pods are ambient (src/core/ambient-enablement.ts, shared with the node broker), with the
 * plugin's config errors: a selector that does not decode is ERR_CNI_INVALID_CONFIG.
 */
import { decodeEnablementSelectors as decode, type EnablementSelector } from '../../core/ambient-enablement.js';
import { CniError } from './cni-error.js';

export {
  DATAPLANE_MODE_LABEL,
  DEFAULT_ENABLEMENT_SELECTORS,
  SIDECAR_STATUS_ANNOTATION,
  isAmbientPod,
  type AmbientCandidate,
  type EnablementSelector,
  type LabelSelector,
} from '../../core/ambient-enablement.js';

/** `enablement_selectors` from the config; null, absent or empty -> Istio's defaults. */
export function decodeEnablementSelectors(raw: unknown): readonly EnablementSelector[] {
  return decode(raw, (message) => {
    throw new CniError('ERR_CNI_INVALID_CONFIG', message);
  });
}
