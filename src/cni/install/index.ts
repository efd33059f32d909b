/** install-cni: puts the istio-cni plugin on a node and keeps it there. */
export { InstallError, type InstallErrorCode } from './errors.js';
export { isJsonObject, jsonEqual, type JsonObject, type JsonValue } from './json.js';
export {
  buildPluginEntry,
  PLUGIN_CNI_VERSION,
  PLUGIN_NAME,
  PLUGIN_TYPE,
  type PluginEntryOptions,
  type PluginLogLevel,
} from './plugin-entry.js';
export {
  chainPlugin,
  chainState,
  classifyNetworkConfig,
  parseNetworkConfig,
  renderNetworkConfig,
  unchainPlugin,
  WRAPPED_LIST_CNI_VERSION,
  WRAPPED_LIST_NAME,
  type ChainState,
  type NetworkConfig,
  type UnchainResult,
} from './conflist.js';
export {
  CNI_CONFIG_EXTENSIONS,
  hasCniConfigExtension,
  configSiblings,
  decidePrimary,
  selectPrimaryConfig,
  unloadableReason,
  type ConfigDirEntry,
  type PrimarySelection,
  type PrimaryDecision,
  type PrimaryDecisionOptions,
  type PrimarySelectionOptions,
} from './primary-config.js';
export {
  apiServerUrl,
  buildKubeconfig,
  renderKubeconfig,
  KUBECONFIG_CLUSTER,
  KUBECONFIG_CONTEXT,
  KUBECONFIG_USER,
  type KubeconfigInputs,
} from './kubeconfig.js';
export { ENV as INSTALL_ENV, loadInstallConfig, type InstallConfig, type InstallFlags, type UninstallPolicy } from './config.js';
export { Installer, STATE_FILENAME, type ConfigOutcome, type InstallerEvents, type InstallerOptions } from './installer.js';
export { InstallDaemon, type DaemonPhase, type InstallDaemonOptions } from './daemon.js';
export { FightDetector } from './fight-detector.js';
export {
  daemonSetTargetsNode,
  decideOnShutdown,
  type DaemonSetFacts,
  type NodeFacts,
  type ShutdownDecision,
} from './upgrade-policy.js';
export { fixedShutdownAdvisor, type ShutdownAdvisor } from './shutdown-advisor.js';
