/**
 * `certbroker install-cni`: wires config, logging, metrics, the ops endpoint, the install
 * daemon, the shutdown advisor and (when enabled) the repair controller, and runs until
 * SIGTERM/SIGINT.
 */
import { Registry } from 'prom-client';
import { collectProcessMetrics } from '../../ops/process-metrics.js';
import { systemClock } from '../../core/clock.js';
import { createLogger, type Logger } from '../../core/log.js';
import { HARD_EXIT_MARGIN_MS, signalController } from '../../ops/lifecycle.js';
import { startOpsServer, type Check } from '../../ops/ops-server.js';
import { loadInstallConfig, type InstallConfig, type InstallFlags } from './config.js';
import { InstallDaemon } from './daemon.js';
import { fixedShutdownAdvisor, type ShutdownAdvisor } from './shutdown-advisor.js';
import type { KubeConfig } from '@kubernetes/client-node';

/** How long the upgrade check (both API reads together) may take at SIGTERM (the pod's grace period is short). */
const SHUTDOWN_CHECK_TIMEOUT_MS = 5_000;
/**
 * A process still alive this long after SIGTERM exits anyway (logged): the upgrade check, the
 * uninstall and the repair controller's stop, with margin, inside the DaemonSet's 15 s grace.
 */
const HARD_EXIT_AFTER_MS = SHUTDOWN_CHECK_TIMEOUT_MS + 2 * HARD_EXIT_MARGIN_MS;

/** install-cni's own API credentials: KUBECONFIG when set, in-cluster otherwise. */
export async function loadKubeConfig(config: Pick<InstallConfig, 'kubeconfig'>): Promise<KubeConfig> {
  const kube = await import('../../kube/index.js');
  return config.kubeconfig !== undefined
    ? kube.loadKubeConfig({ kubeconfigPath: config.kubeconfig })
    : kube.loadKubeConfig({ inCluster: true });
}

async function makeAdvisor(config: InstallConfig, kc: () => Promise<KubeConfig>, logger: Logger): Promise<ShutdownAdvisor> {
  if (config.uninstallOnExit === 'always') return fixedShutdownAdvisor({ action: 'uninstall', reason: 'UNINSTALL_ON_EXIT=always' });
  if (config.uninstallOnExit === 'never') return fixedShutdownAdvisor({ action: 'keep', reason: 'UNINSTALL_ON_EXIT=never' });
  const { KubeShutdownAdvisor } = await import('./shutdown-advisor-kube.js');
  return new KubeShutdownAdvisor({
    kubeConfig: await kc(),
    namespace: config.podNamespace,
    daemonSetName: config.daemonSetName,
    nodeName: config.nodeName ?? '',
    clock: systemClock,
    logger,
    timeoutMs: SHUTDOWN_CHECK_TIMEOUT_MS,
  });
}

export async function runInstallCni(flags: InstallFlags = {}, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const config = loadInstallConfig(env, flags);
  const logger = createLogger({ level: config.logLevel, fields: { component: 'install-cni', node: config.nodeName } });
  const registry = new Registry();
  collectProcessMetrics(registry);
  let kubeConfig: KubeConfig | undefined;
  const kc = async () => (kubeConfig ??= await loadKubeConfig(config));

  const daemon = new InstallDaemon({
    config,
    logger,
    clock: systemClock,
    registry,
    shutdownAdvisor: await makeAdvisor(config, kc, logger),
  });
  const readiness: Check[] = [{ name: 'cni-plugin-installed', check: () => daemon.readinessProblem() }];
  const liveness: Check[] = [{ name: 'install-loop', check: () => daemon.livenessProblem() }];

  const controller = signalController(logger, { hardExitAfterMs: HARD_EXIT_AFTER_MS });
  // Repair problems show in logs and metrics (a stale or unlisted pod watch:
  // certbroker_informer_ready{resource="pods"} 0), not in readiness: readiness is about the
  // plugin, and an API outage must not make every node's istio-cni-node unready.
  const repair = await startRepairIfEnabled({ env, config, kc, logger, registry, signal: controller.signal });

  const ops = await startOpsServer({
    host: config.monitoringHost,
    port: config.monitoringPort,
    registry,
    readiness,
    liveness,
    logger,
  });
  logger.info('install-cni started', {
    netDir: config.mountedCniNetDir,
    binDir: config.mountedCniBinDir,
    opsPort: ops.port,
    mode: config.istioOwnedCniConfig ? 'istio-owned' : 'chained',
  });
  try {
    await daemon.run(controller.signal);
    await repair?.stopped;
  } finally {
    await ops.close();
  }
}

interface RepairHandle {
  readonly stopped: Promise<void>;
}

async function startRepairIfEnabled(options: {
  readonly env: NodeJS.ProcessEnv;
  readonly config: InstallConfig;
  readonly kc: () => Promise<KubeConfig>;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly signal: AbortSignal;
}): Promise<RepairHandle | undefined> {
  // The config alone first: the controller pulls in @kubernetes/client-node (~0.6 s to load),
  // which an install-cni without repair never needs.
  const { loadRepairConfig } = await import('../repair/config.js');
  const repairConfig = loadRepairConfig(options.env, { nodeName: options.config.nodeName });
  if (!repairConfig.enabled) return undefined;
  const { startRepairController } = await import('../repair/controller.js');
  const handle = await startRepairController({
    config: repairConfig,
    kubeConfig: await options.kc(),
    logger: options.logger.child({ component: 'repair' }),
    registry: options.registry,
    clock: systemClock,
    signal: options.signal,
  });
  return { stopped: handle.stopped };
}
