/**
 * Process lifecycle: SIGTERM/SIGINT abort one controller; the component drains within its
 * deadline, then the process exits. A second signal forces an immediate exit.
 */
import type { Logger } from '../core/log.js';

export function signalController(logger: Logger): AbortController {
  const controller = new AbortController();
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      logger.warn('second signal, exiting now', { signal: sig });
      process.exit(130);
    }
    logger.info('shutting down', { signal: sig });
    controller.abort(new Error(`received ${sig}`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return controller;
}

/** Resolves when the signal aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
