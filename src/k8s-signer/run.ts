/**
 * `certbroker k8s-signer` as a process: read the configuration (flags over env), load the
 * kubeconfig (`--kubeconfig`/KUBECONFIG, else in-cluster), start, run until SIGTERM/SIGINT, stop.
 */
import { createLogger } from '../core/log.js';
import { loadKubeConfig } from '../kube/kubeconfig.js';
import { aborted, HARD_EXIT_MARGIN_MS, signalController } from '../ops/lifecycle.js';
import { readK8sSignerConfig, type K8sSignerFlags } from './config.js';
import { startK8sSigner } from './k8s-signer.js';

export async function runK8sSigner(flags: K8sSignerFlags): Promise<void> {
  const config = readK8sSignerConfig(flags);
  const logger = createLogger({ level: config.logLevel });
  const kubeConfig = config.kubeconfigPath ? loadKubeConfig({ kubeconfigPath: config.kubeconfigPath }) : loadKubeConfig({ inCluster: true });
  const controller = signalController(logger, { hardExitAfterMs: config.shutdownGraceMs + HARD_EXIT_MARGIN_MS });
  const signer = await startK8sSigner({ config, kubeConfig, logger, processMetrics: true, signal: controller.signal });
  await aborted(controller.signal);
  await signer.stop(config.shutdownGraceMs);
}
