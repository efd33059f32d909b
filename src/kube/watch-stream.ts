/**
 * One watch response, followed: newline-delimited JSON events handed to `onEvent` until the
 * server ends the stream, it breaks, an event is bad, or the request is aborted (stop or the
 * idle watchdog); and the idle watchdog itself, on the injected clock.
 */
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../core/clock.js';
import { KubeError } from './errors.js';
import type { WatchEvent } from './informer-cache.js';

/** How a watch ended: the server said Gone, the watchdog fired, the server closed it, or stop(). */
export type WatchEnd = { readonly kind: 'gone' | 'idle' | 'closed' | 'stopped'; readonly events: number };

export interface FollowOptions {
  /** The watch request's own signal: aborted by stop() or by the watchdog. */
  readonly request: AbortSignal;
  /** The informer's stop signal (an abort with it set is 'stopped', else 'idle'). */
  readonly stop: AbortSignal;
  /** `watch <path>`, for errors. */
  readonly what: string;
  /** Applies one event: 'gone' ends the watch; a throw fails it. */
  readonly onEvent: (ev: WatchEvent) => 'gone' | undefined;
}

/** Reads `res` event by event; resolves with how it ended, rejects when it broke or an event failed. */
export function followWatch(res: IncomingMessage, options: FollowOptions): Promise<WatchEnd> {
  const { request, stop, what, onEvent } = options;
  let events = 0;
  return new Promise<WatchEnd>((resolve, reject) => {
    let finished = false;
    let buffered = '';
    const finish = (fn: () => void) => {
      if (finished) return;
      finished = true;
      request.removeEventListener('abort', onAbort);
      res.destroy();
      fn();
    };
    const aborted = () => resolve({ kind: stop.aborted ? 'stopped' : 'idle', events });
    const onAbort = () => finish(aborted);
    if (request.aborted) {
      onAbort();
      return;
    }
    request.addEventListener('abort', onAbort, { once: true });
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      if (finished) return;
      buffered += chunk;
      for (let nl = buffered.indexOf('\n'); nl >= 0 && !finished; nl = buffered.indexOf('\n')) {
        const line = buffered.slice(0, nl).trim();
        buffered = buffered.slice(nl + 1);
        if (line === '') continue;
        let ev: WatchEvent;
        try {
          ev = JSON.parse(line) as WatchEvent;
        } catch (err) {
          finish(() => reject(new KubeError('ERR_KUBE_RESPONSE_INVALID', `${what}: an event is not JSON`, { status: 'unavailable', cause: err })));
          return;
        }
        let outcome: 'gone' | undefined;
        try {
          outcome = onEvent(ev);
        } catch (err) {
          finish(() => reject(err));
          return;
        }
        if (outcome === 'gone') {
          finish(() => resolve({ kind: 'gone', events }));
          return;
        }
        events++;
      }
    });
    res.on('end', () => finish(() => resolve({ kind: 'closed', events })));
    const broken = (err?: Error) =>
      finish(() => {
        if (request.aborted) aborted();
        else reject(new KubeError('ERR_KUBE_UNREACHABLE', `${what}: the stream broke off${err ? `: ${err.message}` : ''}`, { status: 'unavailable', cause: err }));
      });
    res.on('error', broken);
    res.on('close', () => broken());
  });
}

/**
 * Calls `onIdle` once when `lastActivity()` is more than `idleMs` in the past, checking on
 * `clock` each time the window could have run out. Returns the function that turns it off.
 */
export function startWatchdog(clock: Clock, idleMs: number, lastActivity: () => number, onIdle: () => void): () => void {
  const off = new AbortController();
  void (async () => {
    for (;;) {
      const wait = lastActivity() + idleMs - clock.now();
      if (wait <= 0) {
        onIdle();
        return;
      }
      await clock.sleep(wait, off.signal);
    }
  })().catch(() => undefined);
  return () => off.abort();
}
