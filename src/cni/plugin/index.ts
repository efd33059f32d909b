/**
 * The istio-cni plugin: a CNI 1.1.0 chained plugin that passes prevResult through, registers
 * ambient pods with the node broker (Istio's CNIPluginAddEvent, src/protocol/cni-event.ts) and programs sidecar
 * redirection in the pod's network namespace. `main.ts` is the executable entry.
 */
export { runPlugin, ENV, OWN_AGENT_POD_PREFIX } from './plugin.js';
export type { PluginOptions, PluginOutcome, CniCommand } from './plugin.js';
export { CniError, CNI_WIRE_CODE, toErrorResult } from './cni-error.js';
export type { CniErrorCode, CniErrorResult } from './cni-error.js';
export { SUPPORTED_VERSIONS, CURRENT_VERSION, convertResult, resultAddresses, versionAtLeast } from './cni-version.js';
export { parseCniArgs } from './cni-args.js';
export type { K8sArgs } from './cni-args.js';
export { parsePluginConfig, decodeConfigJson, ENV_DRY_RUN_FILE_PATH } from './config.js';
export type { PluginConfig } from './config.js';
export { isAmbientPod, decodeEnablementSelectors, DEFAULT_ENABLEMENT_SELECTORS } from './enablement.js';
export type { EnablementSelector, LabelSelector } from './enablement.js';
export { sidecarDecision, redirectSettings } from './sidecar-redirect.js';
export type { SidecarRedirect, SidecarDecision } from './sidecar-redirect.js';
export { sidecarPlan, IptablesSidecarProgrammer } from './sidecar-programmer.js';
export type { SidecarProgrammer, SidecarProgramRequest } from './sidecar-programmer.js';
export { pushCniAddEvent, type CniEventClientOptions } from './cni-event-client.js';
export { HttpsKubeClient, podFromObject } from './kube-client.js';
export type { PodInfo, NamespaceInfo, PodSource } from './kube-client.js';
export { loadKubeconfig } from './kubeconfig.js';
