/**
 * `certbroker broker` as a process: read the configuration (flags over env), start the node
 * broker, run until SIGTERM/SIGINT, drain within BROKER_SHUTDOWN_GRACE_SECONDS; a process still
 * alive 3 s after that exits anyway (logged).
 */
import { createLogger, logLevelOr } from '../core/log.js';
import { aborted, HARD_EXIT_MARGIN_MS, signalController } from '../ops/lifecycle.js';
import { startBroker } from './broker.js';
import { ENV, readBrokerConfig, type BrokerFlags } from './config.js';

export async function runBroker(flags: BrokerFlags): Promise<void> {
  const logger = createLogger({ level: logLevelOr(process.env[ENV.LOG_LEVEL], 'info') });
  const config = await readBrokerConfig({ flags, logger });
  const controller = signalController(logger, { hardExitAfterMs: config.shutdownGraceMs + HARD_EXIT_MARGIN_MS });
  let broker;
  try {
    broker = await startBroker(config, { signal: controller.signal });
  } catch (err) {
    if (!controller.signal.aborted) throw err;
    logger.info('node broker stopped before it finished starting');
    return;
  }
  await aborted(controller.signal);
  await broker.stop();
}
