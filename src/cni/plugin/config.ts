/**
 * The plugin's network configuration (stdin JSON), with Istio's field names, current and legacy:
 *
 *   cniVersion, name, type, prevResult                    CNI spec
 *   plugin_log_level (legacy: log_level)                  debug|info|warn|error|none
 *   cni_agent_run_dir                                     default /var/run/istio-cni; holds the
 *                                                         kubeconfig (istio-cni-kubeconfig) and the
 *                                                         broker socket (pluginevent.sock)
 *   ambient_enabled, enablement_selectors                 ambient detection
 *   exclude_namespaces (legacy: kubernetes.exclude_namespaces)
 *   pod_namespace                                         the istio-cni agent's own namespace
 *   kubernetes.kubeconfig, kubernetes.cni_bin_dir         legacy; kubeconfig overrides the run dir's
 *   native_nftables, enable_ambient_detection_retry, dns, ipam   accepted
 *
 * Our own additions (absent from Istio's config, all optional): pod_retrieval_max_retries,
 * pod_retrieval_interval_ms, kube_request_timeout_ms, cni_event_timeout_ms, cni_event_socket,
 * dry_run_file_path, add_timeout_ms (the whole ADD's budget, default 30 000: every request and
 * retry wait fits in what is left of it). `DRY_RUN_FILE_PATH` in the environment (Istio's variable) also selects
 * dry-run: sidecar rules are written to that file instead of being applied.
 *
 * Every problem is listed at once in one ERR_CNI_INVALID_CONFIG error.
 */
import { CniError } from './cni-error.js';
import { DEFAULT_CONFIG_VERSION, SUPPORTED_VERSIONS, isSupportedVersion } from './cni-version.js';
import { decodeEnablementSelectors, type EnablementSelector } from './enablement.js';
import type { LogLevel } from '../../core/log.js';
import { CNI_EVENT_SOCKET_NAME, CNI_KUBECONFIG_FILE_NAME, DEFAULT_CNI_AGENT_RUN_DIR } from '../../protocol/cni-event.js';

export const ENV_DRY_RUN_FILE_PATH = 'DRY_RUN_FILE_PATH';

/**
 * Default budget of one ADD. Well under what the runtime allows a sandbox setup (kubelet gives
 * RunPodSandbox 4 min by default, with the primary plugin and IPAM in it): a hung API server or
 * broker costs the pod one failed ADD of 30 s, which the runtime retries.
 */
export const DEFAULT_ADD_TIMEOUT_MS = 30_000;

export interface PluginConfig {
  readonly cniVersion: string;
  readonly name: string;
  readonly type: string;
  readonly logLevel: LogLevel;
  readonly cniAgentRunDir: string;
  readonly kubeconfigPath: string;
  readonly cniBinDir: string;
  readonly cniEventSocketPath: string;
  readonly ambientEnabled: boolean;
  readonly enablementSelectors: readonly EnablementSelector[];
  readonly excludeNamespaces: readonly string[];
  readonly podNamespace: string;
  readonly nativeNftables: boolean;
  readonly enableAmbientDetectionRetry: boolean;
  readonly podRetrievalMaxRetries: number;
  readonly podRetrievalIntervalMs: number;
  readonly kubeRequestTimeoutMs: number;
  readonly cniEventTimeoutMs: number;
  /** The whole ADD (API reads with their retries, broker registration, rule programming) ends within this. */
  readonly addTimeoutMs: number;
  readonly dryRunFilePath: string | undefined;
  /** prevResult as given (undefined when absent); converted later, per command. */
  readonly prevResult: unknown;
  /** The whole decoded object, for command-specific keys (GC's valid attachments). */
  readonly raw: Readonly<Record<string, unknown>>;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Decodes stdin; no input or anything but a JSON object is a decode failure (code 6). */
export function decodeConfigJson(stdin: string): Record<string, unknown> {
  if (stdin.trim() === '') throw new CniError('ERR_CNI_DECODE', 'no network configuration on stdin');
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdin);
  } catch (err) {
    throw new CniError('ERR_CNI_DECODE', 'network configuration on stdin is not valid JSON', {
      details: err instanceof Error ? err.message : '',
    });
  }
  if (!isObject(parsed)) throw new CniError('ERR_CNI_DECODE', 'network configuration on stdin is not a JSON object');
  return parsed;
}

/** The config's cniVersion, checked against what we support (code 1 otherwise). */
export function configVersion(raw: Record<string, unknown>): string {
  const v = raw.cniVersion;
  if (v === undefined || v === '') return DEFAULT_CONFIG_VERSION;
  if (typeof v !== 'string') throw new CniError('ERR_CNI_DECODE', 'cniVersion is not a string');
  if (!isSupportedVersion(v)) {
    throw new CniError('ERR_CNI_INCOMPATIBLE_VERSION', `incompatible CNI versions: config is ${JSON.stringify(v)}`, {
      details: `plugin supports ${SUPPORTED_VERSIONS.join(', ')}`,
    });
  }
  return v;
}

const LOG_LEVELS: Readonly<Record<string, LogLevel>> = {
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  warning: 'warn',
  error: 'error',
  fatal: 'error',
  none: 'silent',
  silent: 'silent',
};

class Problems {
  readonly list: string[] = [];
  add(msg: string): void {
    this.list.push(msg);
  }
}

function str(raw: Record<string, unknown>, key: string, p: Problems, fallback = ''): string {
  const v = raw[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'string') {
    p.add(`${key} must be a string, got ${JSON.stringify(v)}`);
    return fallback;
  }
  return v;
}

function bool(raw: Record<string, unknown>, key: string, p: Problems): boolean {
  const v = raw[key];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') {
    p.add(`${key} must be a boolean, got ${JSON.stringify(v)}`);
    return false;
  }
  return v;
}

function int(raw: Record<string, unknown>, key: string, p: Problems, fallback: number, min: number): number {
  const v = raw[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    p.add(`${key} must be an integer >= ${min}, got ${JSON.stringify(v)}`);
    return fallback;
  }
  return v;
}

function strList(v: unknown, key: string, p: Problems): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || !v.every((s) => typeof s === 'string')) {
    p.add(`${key} must be an array of strings, got ${JSON.stringify(v)}`);
    return [];
  }
  return v as string[];
}

function joinPath(dir: string, file: string): string {
  return dir.endsWith('/') ? dir + file : `${dir}/${file}`;
}

export function parsePluginConfig(
  raw: Record<string, unknown>,
  env: Readonly<Record<string, string | undefined>>,
): PluginConfig {
  const cniVersion = configVersion(raw);
  const p = new Problems();
  const name = str(raw, 'name', p);
  const type = str(raw, 'type', p, 'istio-cni');

  const levelRaw = str(raw, 'plugin_log_level', p) || str(raw, 'log_level', p) || 'info';
  const logLevel = LOG_LEVELS[levelRaw.toLowerCase()];
  if (logLevel === undefined) p.add(`plugin_log_level ${JSON.stringify(levelRaw)} is not debug|info|warn|error|none`);

  const k8s = raw.kubernetes;
  let legacy: Record<string, unknown> = {};
  if (k8s !== undefined && k8s !== null) {
    if (isObject(k8s)) legacy = k8s;
    else p.add('kubernetes must be an object');
  }
  const cniAgentRunDir = str(raw, 'cni_agent_run_dir', p) || DEFAULT_CNI_AGENT_RUN_DIR;
  const legacyKubeconfig = str(legacy, 'kubeconfig', p);
  const excludeNamespaces = [
    ...strList(raw.exclude_namespaces, 'exclude_namespaces', p),
    ...strList(legacy.exclude_namespaces, 'kubernetes.exclude_namespaces', p),
  ];

  let enablementSelectors: readonly EnablementSelector[] = [];
  try {
    enablementSelectors = decodeEnablementSelectors(raw.enablement_selectors);
  } catch (err) {
    p.add(err instanceof Error ? err.message : String(err));
  }

  for (const key of ['dns', 'ipam'] as const) {
    if (raw[key] !== undefined && raw[key] !== null && !isObject(raw[key])) p.add(`${key} must be an object`);
  }

  const envDryRun = env[ENV_DRY_RUN_FILE_PATH];
  const dryRunFilePath = (envDryRun !== undefined && envDryRun !== '' ? envDryRun : undefined) ?? (str(raw, 'dry_run_file_path', p) || undefined);

  const config: PluginConfig = {
    cniVersion,
    name,
    type,
    logLevel: logLevel ?? 'info',
    cniAgentRunDir,
    kubeconfigPath: legacyKubeconfig || joinPath(cniAgentRunDir, CNI_KUBECONFIG_FILE_NAME),
    cniBinDir: str(legacy, 'cni_bin_dir', p),
    cniEventSocketPath: str(raw, 'cni_event_socket', p) || joinPath(cniAgentRunDir, CNI_EVENT_SOCKET_NAME),
    ambientEnabled: bool(raw, 'ambient_enabled', p),
    enablementSelectors,
    excludeNamespaces,
    podNamespace: str(raw, 'pod_namespace', p),
    nativeNftables: bool(raw, 'native_nftables', p),
    enableAmbientDetectionRetry: bool(raw, 'enable_ambient_detection_retry', p),
    podRetrievalMaxRetries: int(raw, 'pod_retrieval_max_retries', p, 30, 1),
    podRetrievalIntervalMs: int(raw, 'pod_retrieval_interval_ms', p, 1000, 0),
    kubeRequestTimeoutMs: int(raw, 'kube_request_timeout_ms', p, 5000, 1),
    cniEventTimeoutMs: int(raw, 'cni_event_timeout_ms', p, 5000, 1),
    addTimeoutMs: int(raw, 'add_timeout_ms', p, DEFAULT_ADD_TIMEOUT_MS, 1),
    dryRunFilePath,
    prevResult: raw.prevResult === null ? undefined : raw.prevResult,
    raw,
  };
  if (p.list.length > 0) {
    throw new CniError('ERR_CNI_INVALID_CONFIG', `invalid network configuration: ${p.list.join('; ')}`);
  }
  return Object.freeze(config);
}
