/**
 * The istio-cni entry that install-cni chains into the node's CNI config. Field names and
 * defaults follow Istio's plugin config (cni/pkg/plugin), so Istio's own plugin and ours read
 * the same file. `exclude_namespaces` is `null` when empty, as Go encodes a nil slice.
 */
import { InstallError } from './errors.js';
import type { JsonObject, JsonValue } from './json.js';

/** The plugin `type` (binary name) that identifies our entry in a conflist. */
export const PLUGIN_TYPE = 'istio-cni';
export const PLUGIN_NAME = 'istio-cni';
/** cniVersion of a standalone plugin config; it is dropped when the entry joins a list. */
export const PLUGIN_CNI_VERSION = '0.3.1';

export type PluginLogLevel = 'debug' | 'info' | 'warn' | 'error' | 'none';

export interface PluginEntryOptions {
  /** Directory shared by install-cni, the node agent and the plugin (kubeconfig, sockets). */
  readonly cniAgentRunDir: string;
  readonly logLevel: PluginLogLevel;
  /** Namespace install-cni runs in (the plugin skips its own pods). */
  readonly podNamespace: string;
  readonly ambientEnabled: boolean;
  readonly excludeNamespaces: readonly string[];
  readonly nativeNftables: boolean;
  readonly enableAmbientDetectionRetry: boolean;
  /** `add_timeout_ms` (ours; Istio's plugin ignores it): written only when set. */
  readonly addTimeoutMs?: number | undefined;
}

/** The standalone plugin config (what Istio's istio-cni.conf holds). */
export function buildPluginEntry(options: PluginEntryOptions): JsonObject {
  if (options.cniAgentRunDir === '' || !options.cniAgentRunDir.startsWith('/')) {
    throw new InstallError(
      'ERR_CNI_PLUGIN_ENTRY_INVALID',
      `cni agent run dir must be an absolute path, got ${JSON.stringify(options.cniAgentRunDir)}`,
    );
  }
  const exclude: JsonValue = options.excludeNamespaces.length === 0 ? null : [...options.excludeNamespaces];
  return {
    cniVersion: PLUGIN_CNI_VERSION,
    name: PLUGIN_NAME,
    type: PLUGIN_TYPE,
    ipam: {},
    dns: {},
    plugin_log_level: options.logLevel,
    cni_agent_run_dir: options.cniAgentRunDir,
    ambient_enabled: options.ambientEnabled,
    enablement_selectors: [],
    exclude_namespaces: exclude,
    pod_namespace: options.podNamespace,
    native_nftables: options.nativeNftables,
    enable_ambient_detection_retry: options.enableAmbientDetectionRetry,
    ...(options.addTimeoutMs !== undefined ? { add_timeout_ms: options.addTimeoutMs } : {}),
  };
}
