/**
 * Repair controller configuration (env names follow Istio's REPAIR_* where they exist).
 */
import { ConfigReader } from '../../core/config.js';
import { readInformerSettings, type InformerSettings } from '../../kube/informer-settings.js';
import type { BrokenPodCriteria } from './broken-pod.js';

export const REPAIR_ENV = {
  enabled: 'REPAIR_ENABLED',
  mode: 'REPAIR_MODE',
  nodeName: 'NODE_NAME',
  labelKey: 'REPAIR_LABEL_KEY',
  labelValue: 'REPAIR_LABEL_VALUE',
  sidecarAnnotation: 'REPAIR_SIDECAR_ANNOTATION',
  initContainerName: 'REPAIR_INIT_CONTAINER_NAME',
  initExitCode: 'REPAIR_INIT_CONTAINER_EXIT_CODE',
  initTerminationMessage: 'REPAIR_INIT_CONTAINER_TERMINATION_MESSAGE',
  labelSelectors: 'REPAIR_LABEL_SELECTORS',
  fieldSelectors: 'REPAIR_FIELD_SELECTORS',
  maxAttempts: 'REPAIR_MAX_ATTEMPTS',
} as const;

export type RepairMode =
  /** Add `labelKey=labelValue` through the pods/status subresource (lower privilege than pods patch). */
  | 'label'
  /** Delete the pod (UID + resourceVersion preconditions) so its owner recreates it. */
  | 'delete';

export interface RepairConfig {
  readonly enabled: boolean;
  readonly mode: RepairMode;
  readonly nodeName: string;
  readonly labelKey: string;
  readonly labelValue: string;
  readonly criteria: BrokenPodCriteria;
  readonly labelSelector: string | undefined;
  /** Extra field selectors; `spec.nodeName=<node>` is always added. */
  readonly fieldSelector: string | undefined;
  readonly maxAttempts: number;
  /** The pod watch's watchdog and page size (KUBE_WATCH_IDLE_TIMEOUT_SECONDS, KUBE_LIST_PAGE_SIZE). */
  readonly informer: InformerSettings;
}

export type RepairFlags = Partial<Record<keyof typeof REPAIR_ENV, string | undefined>>;

const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

export function loadRepairConfig(env: Readonly<Record<string, string | undefined>> = process.env, flags: RepairFlags = {}): RepairConfig {
  const r = new ConfigReader(env);
  const enabled = r.bool(REPAIR_ENV.enabled, true, flags.enabled);
  const nodeName = r.string(REPAIR_ENV.nodeName, '', flags.nodeName);
  if (enabled && nodeName === '') r.problem(`${REPAIR_ENV.nodeName} is required for the repair controller (or set ${REPAIR_ENV.enabled}=false)`);
  const labelKey = r.string(REPAIR_ENV.labelKey, 'cni.istio.io/uninitialized', flags.labelKey);
  if (!LABEL_KEY.test(labelKey)) r.problem(`${REPAIR_ENV.labelKey}=${JSON.stringify(labelKey)} is not a valid label key`);
  const labelValue = r.string(REPAIR_ENV.labelValue, 'true', flags.labelValue);
  if (!LABEL_VALUE.test(labelValue)) r.problem(`${REPAIR_ENV.labelValue}=${JSON.stringify(labelValue)} is not a valid label value`);
  const config: RepairConfig = {
    enabled,
    mode: r.oneOf<RepairMode>(REPAIR_ENV.mode, ['label', 'delete'], 'delete', flags.mode),
    nodeName,
    labelKey,
    labelValue,
    criteria: Object.freeze({
      sidecarAnnotation: r.string(REPAIR_ENV.sidecarAnnotation, '', flags.sidecarAnnotation),
      initContainerName: r.string(REPAIR_ENV.initContainerName, 'istio-validation', flags.initContainerName),
      initExitCode: r.int(REPAIR_ENV.initExitCode, 126, { min: 0, max: 255, explicit: flags.initExitCode }),
      initTerminationMessage: r.string(REPAIR_ENV.initTerminationMessage, '', flags.initTerminationMessage),
    }),
    labelSelector: r.optionalString(REPAIR_ENV.labelSelectors, flags.labelSelectors),
    fieldSelector: r.optionalString(REPAIR_ENV.fieldSelectors, flags.fieldSelectors),
    maxAttempts: r.int(REPAIR_ENV.maxAttempts, 5, { min: 1, max: 100, explicit: flags.maxAttempts }),
    informer: readInformerSettings(r),
  };
  r.done();
  return Object.freeze(config);
}
