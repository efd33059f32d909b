/**
 * install-cni configuration: one frozen object built from env (and CLI flags), validated once,
 * every problem listed together. Variable names follow Istio's install-cni where one exists.
 */
import { ConfigReader } from '../../core/config.js';
import type { LogLevel } from '../../core/log.js';
import { CNI_KUBECONFIG_FILE_NAME, DEFAULT_CNI_AGENT_RUN_DIR } from '../../protocol/cni-event.js';
import type { PluginLogLevel } from './plugin-entry.js';

export const ENV = {
  mountedCniNetDir: 'MOUNTED_CNI_NET_DIR',
  cniConfName: 'CNI_CONF_NAME',
  mountedCniBinDir: 'MOUNTED_CNI_BIN_DIR',
  binariesSourceDir: 'CNI_BINARIES_SOURCE_DIR',
  binaries: 'CNI_BINARIES',
  cniAgentRunDir: 'CNI_AGENT_RUN_DIR',
  mountedCniAgentRunDir: 'MOUNTED_CNI_AGENT_RUN_DIR',
  kubeconfigFilename: 'KUBECONFIG_FILENAME',
  kubeconfigMode: 'KUBECONFIG_MODE',
  serviceAccountDir: 'SERVICE_ACCOUNT_DIR',
  kubeCaFile: 'KUBE_CA_FILE',
  skipTlsVerify: 'SKIP_TLS_VERIFY',
  serviceHost: 'KUBERNETES_SERVICE_HOST',
  servicePort: 'KUBERNETES_SERVICE_PORT',
  serviceProtocol: 'KUBERNETES_SERVICE_PROTOCOL',
  pluginLogLevel: 'PLUGIN_LOG_LEVEL',
  pluginAddTimeoutMs: 'PLUGIN_ADD_TIMEOUT_MS',
  podNamespace: 'POD_NAMESPACE',
  podName: 'POD_NAME',
  nodeName: 'NODE_NAME',
  daemonSetName: 'DAEMONSET_NAME',
  ambientEnabled: 'AMBIENT_ENABLED',
  excludeNamespaces: 'EXCLUDE_NAMESPACES',
  nativeNftables: 'NATIVE_NFTABLES',
  istioOwnedCniConfig: 'ISTIO_OWNED_CNI_CONFIG',
  istioOwnedCniConfFilename: 'ISTIO_OWNED_CNI_CONF_FILENAME',
  resyncIntervalSeconds: 'RESYNC_INTERVAL_SECONDS',
  primaryConfigWaitSeconds: 'PRIMARY_CONFIG_WAIT_SECONDS',
  fightWindowSeconds: 'FIGHT_WINDOW_SECONDS',
  fightThreshold: 'FIGHT_THRESHOLD',
  uninstallOnExit: 'UNINSTALL_ON_EXIT',
  monitoringHost: 'MONITORING_HOST',
  monitoringPort: 'MONITORING_PORT',
  logLevel: 'LOG_LEVEL',
  kubeconfig: 'KUBECONFIG',
} as const;

export type UninstallPolicy =
  /** Remove unless the DaemonSet still exists and still targets this node (default). */
  | 'unless-upgrade'
  | 'always'
  | 'never';

export interface InstallConfig {
  readonly mountedCniNetDir: string;
  readonly cniConfName: string | undefined;
  readonly mountedCniBinDir: string;
  readonly binariesSourceDir: string;
  readonly binaries: readonly string[];
  /** The run dir as the plugin sees it on the host (goes into the plugin entry). */
  readonly cniAgentRunDir: string;
  /** The same dir as mounted into this container (where the kubeconfig is written). */
  readonly mountedCniAgentRunDir: string;
  readonly kubeconfigFilename: string;
  readonly kubeconfigMode: number;
  readonly serviceAccountDir: string;
  readonly kubeCaFile: string | undefined;
  readonly skipTlsVerify: boolean;
  readonly serviceHost: string;
  readonly servicePort: string;
  readonly serviceProtocol: string;
  readonly pluginLogLevel: PluginLogLevel;
  /** The plugin's ADD budget (`add_timeout_ms` in the entry); undefined: the plugin's default (30 s). */
  readonly pluginAddTimeoutMs: number | undefined;
  readonly podNamespace: string;
  readonly podName: string | undefined;
  readonly nodeName: string | undefined;
  readonly daemonSetName: string;
  readonly ambientEnabled: boolean;
  readonly excludeNamespaces: readonly string[];
  readonly nativeNftables: boolean;
  /** istio-owned mode: write our own config file instead of editing the primary's. */
  readonly istioOwnedCniConfig: boolean;
  readonly istioOwnedCniConfFilename: string;
  readonly resyncIntervalSeconds: number;
  /**
   * How long to wait for the primary config while it is absent, empty or not loadable (mid-write)
   * before treating the next valid file as the primary, as the runtime then does. 0: never wait.
   */
  readonly primaryConfigWaitSeconds: number;
  readonly fightWindowSeconds: number;
  readonly fightThreshold: number;
  readonly uninstallOnExit: UninstallPolicy;
  readonly monitoringHost: string;
  readonly monitoringPort: number;
  readonly logLevel: LogLevel;
  /** A kubeconfig for install-cni's own API calls; in-cluster config when unset. */
  readonly kubeconfig: string | undefined;
}

export type InstallFlags = Partial<Record<keyof typeof ENV, string>>;

const PLUGIN_LEVELS: readonly PluginLogLevel[] = ['debug', 'info', 'warn', 'error', 'none'];

function absolute(reader: ConfigReader, name: string, value: string): string {
  if (!value.startsWith('/')) reader.problem(`${name}=${JSON.stringify(value)} must be an absolute path`);
  return value;
}

function plainName(reader: ConfigReader, name: string, value: string): string {
  if (value === '' || value.includes('/') || value === '.' || value === '..') {
    reader.problem(`${name}=${JSON.stringify(value)} must be a file name without a directory`);
  }
  return value;
}

export function loadInstallConfig(env: Readonly<Record<string, string | undefined>> = process.env, flags: InstallFlags = {}): InstallConfig {
  const r = new ConfigReader(env);
  const s = (key: keyof typeof ENV, fallback: string) => r.string(ENV[key], fallback, flags[key]);
  const modeRaw = s('kubeconfigMode', '0600');
  let kubeconfigMode = 0o600;
  if (!/^0?[0-7]{3}$/.test(modeRaw)) r.problem(`${ENV.kubeconfigMode}=${JSON.stringify(modeRaw)} is not an octal file mode such as 0600`);
  else kubeconfigMode = parseInt(modeRaw, 8);
  const logLevel = r.logLevel(ENV.logLevel, flags.logLevel);
  const cniConfName = r.optionalString(ENV.cniConfName, flags.cniConfName);
  const binaries = r.list(ENV.binaries, ['istio-cni', 'istio-iptables'], flags.binaries);
  const config: InstallConfig = {
    mountedCniNetDir: absolute(r, ENV.mountedCniNetDir, s('mountedCniNetDir', '/host/etc/cni/net.d')),
    cniConfName: cniConfName === undefined ? undefined : plainName(r, ENV.cniConfName, cniConfName),
    mountedCniBinDir: absolute(r, ENV.mountedCniBinDir, s('mountedCniBinDir', '/host/opt/cni/bin')),
    binariesSourceDir: absolute(r, ENV.binariesSourceDir, s('binariesSourceDir', '/opt/certbroker/cni-bin')),
    binaries: binaries.map((b) => plainName(r, ENV.binaries, b)),
    cniAgentRunDir: absolute(r, ENV.cniAgentRunDir, s('cniAgentRunDir', DEFAULT_CNI_AGENT_RUN_DIR)),
    mountedCniAgentRunDir: absolute(r, ENV.mountedCniAgentRunDir, s('mountedCniAgentRunDir', s('cniAgentRunDir', DEFAULT_CNI_AGENT_RUN_DIR))),
    kubeconfigFilename: plainName(r, ENV.kubeconfigFilename, s('kubeconfigFilename', CNI_KUBECONFIG_FILE_NAME)),
    kubeconfigMode,
    serviceAccountDir: absolute(r, ENV.serviceAccountDir, s('serviceAccountDir', '/var/run/secrets/kubernetes.io/serviceaccount')),
    kubeCaFile: r.optionalString(ENV.kubeCaFile, flags.kubeCaFile),
    skipTlsVerify: r.bool(ENV.skipTlsVerify, false, flags.skipTlsVerify),
    serviceHost: r.required(ENV.serviceHost, flags.serviceHost),
    servicePort: s('servicePort', '443'),
    serviceProtocol: s('serviceProtocol', 'https'),
    pluginLogLevel: r.oneOf(ENV.pluginLogLevel, PLUGIN_LEVELS, 'info', flags.pluginLogLevel),
    pluginAddTimeoutMs:
      r.raw(ENV.pluginAddTimeoutMs, flags.pluginAddTimeoutMs) === undefined
        ? undefined
        : r.int(ENV.pluginAddTimeoutMs, 0, { min: 1000, max: 600_000, explicit: flags.pluginAddTimeoutMs }),
    podNamespace: s('podNamespace', 'istio-system'),
    podName: r.optionalString(ENV.podName, flags.podName),
    nodeName: r.optionalString(ENV.nodeName, flags.nodeName),
    daemonSetName: s('daemonSetName', 'istio-cni-node'),
    ambientEnabled: r.bool(ENV.ambientEnabled, false, flags.ambientEnabled),
    excludeNamespaces: r.list(ENV.excludeNamespaces, [], flags.excludeNamespaces),
    nativeNftables: r.bool(ENV.nativeNftables, false, flags.nativeNftables),
    istioOwnedCniConfig: r.bool(ENV.istioOwnedCniConfig, false, flags.istioOwnedCniConfig),
    istioOwnedCniConfFilename: plainName(r, ENV.istioOwnedCniConfFilename, s('istioOwnedCniConfFilename', '02-istio-cni.conflist')),
    resyncIntervalSeconds: r.int(ENV.resyncIntervalSeconds, 15, { min: 1, max: 3600, explicit: flags.resyncIntervalSeconds }),
    primaryConfigWaitSeconds: r.int(ENV.primaryConfigWaitSeconds, 60, { min: 0, max: 86_400, explicit: flags.primaryConfigWaitSeconds }),
    fightWindowSeconds: r.int(ENV.fightWindowSeconds, 60, { min: 1, max: 86_400, explicit: flags.fightWindowSeconds }),
    fightThreshold: r.int(ENV.fightThreshold, 3, { min: 1, max: 1000, explicit: flags.fightThreshold }),
    uninstallOnExit: r.oneOf<UninstallPolicy>(ENV.uninstallOnExit, ['unless-upgrade', 'always', 'never'], 'unless-upgrade', flags.uninstallOnExit),
    monitoringHost: s('monitoringHost', '0.0.0.0'),
    monitoringPort: r.int(ENV.monitoringPort, 15014, { min: 0, max: 65535, explicit: flags.monitoringPort }),
    logLevel,
    kubeconfig: r.optionalString(ENV.kubeconfig, flags.kubeconfig),
  };
  if (config.binaries.length === 0) r.problem(`${ENV.binaries} lists no binaries`);
  if (config.istioOwnedCniConfig && !config.istioOwnedCniConfFilename.endsWith('.conflist')) {
    r.problem(`${ENV.istioOwnedCniConfFilename}=${JSON.stringify(config.istioOwnedCniConfFilename)} must end in .conflist`);
  }
  if (config.uninstallOnExit === 'unless-upgrade' && config.nodeName === undefined) {
    r.problem(`${ENV.nodeName} is required to tell an upgrade from an uninstall (or set ${ENV.uninstallOnExit}=always|never)`);
  }
  r.done();
  return Object.freeze(config);
}
