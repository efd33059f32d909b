/**
 * Process lifecycle: SIGTERM/SIGINT abort one controller; the component drains within its
 * deadline, then the process exits. A second signal forces an immediate exit (130).
 *
 * Last resort: with `hardExitAfterMs`, a process still alive that long after the first signal
 * (a drain that hangs, or a handle nothing closed) logs what is still open and exits with 1.
 * The timer is unref'd: it never keeps a process alive that would otherwise end.
 *
 * A reader that goes away (`certbroker start | head -1`: EPIPE on stdout or stderr) is treated
 * like SIGTERM: the component stops quietly and cleans up instead of dying on an unhandled
 * 'error' event with a stack trace. Later writes to the broken stream are dropped.
 */
import { errCode } from '../core/errors.js';
import type { Logger } from '../core/log.js';

/** Added to a component's drain deadline to get its hard-exit bound. */
export const HARD_EXIT_MARGIN_MS = 3000;

export interface SignalControllerOptions {
  /** After the first signal (or a broken stdout/stderr), exit(1) if still alive this much later. */
  readonly hardExitAfterMs?: number;
}

/** What keeps the event loop alive, counted by kind (`{ TCPSocketWrap: 2, Timeout: 1 }`). */
export function activeResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of process.getActiveResourcesInfo()) counts[r] = (counts[r] ?? 0) + 1;
  return counts;
}

function isBrokenPipe(err: unknown): boolean {
  const code = errCode(err);
  return code === 'EPIPE' || code === 'ERR_STREAM_DESTROYED' || code === 'ERR_STREAM_WRITE_AFTER_END';
}

export function signalController(logger: Logger, options: SignalControllerOptions = {}): AbortController {
  const controller = new AbortController();
  let signals = 0;
  let stderrBroken = false;
  const log = (fn: () => void) => {
    if (!stderrBroken) fn();
  };
  const begin = (reason: Error) => {
    if (controller.signal.aborted) return;
    controller.abort(reason);
    const graceMs = options.hardExitAfterMs;
    if (graceMs === undefined) return;
    const timer = setTimeout(() => {
      log(() => logger.error('shutdown did not finish within its grace period; exiting now', { graceMs, stillOpen: activeResources() }));
      process.exit(1);
    }, graceMs);
    timer.unref();
  };
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log(() => logger.warn('second signal, exiting now', { signal: sig }));
      process.exit(130);
    }
    log(() => logger.info('shutting down', { signal: sig }));
    begin(new Error(`received ${sig}`));
  };
  const onStreamError = (name: 'stdout' | 'stderr') => (err: unknown) => {
    if (!isBrokenPipe(err)) throw err;
    if (name === 'stderr') stderrBroken = true;
    if (controller.signal.aborted) return;
    log(() => logger.debug(`${name} closed by its reader; shutting down`));
    begin(new Error(`${name} closed`));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.stdout.on('error', onStreamError('stdout'));
  process.stderr.on('error', onStreamError('stderr'));
  return controller;
}

/** Resolves when the signal aborts. */
export function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}
