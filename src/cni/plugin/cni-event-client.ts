/**
 * Registers an ambient pod with the node broker: Istio's `CNIPluginAddEvent` (the wire contract
 * is src/protocol/cni-event.ts, shared with the broker's registration server), `POST /cmdadd`
 * over the broker's Unix socket, so Istio's own plugin and ours speak the same protocol.
 * 200 is success; 503 (the broker's pod lookup failed) and no answer within the timeout fail the
 * ADD with "try again later" (11); any other status fails it with 101. The timeout counts from the
 * start of the request on the given clock; `signal` (the ADD's budget) abandons it earlier.
 */
import { systemClock, type Clock } from '../../core/clock.js';
import { abortReason, deadline } from '../../core/deadline.js';
import {
  CNI_ADD_EVENT_PATH,
  CNI_ADD_EVENT_RETRY_STATUS,
  encodeCniAddEvent,
  type CniPluginAddEvent,
} from '../../protocol/cni-event.js';
import { CniError } from './cni-error.js';
import { isInterrupted, postOverUnixSocket, type UnixHttpAnswer } from './unix-http.js';

export interface CniEventClientOptions {
  readonly socketPath: string;
  readonly timeoutMs: number;
  /** Abandons the request (the caller's overall budget); rejects with its reason. */
  readonly signal?: AbortSignal;
  readonly clock?: Clock;
}

export async function pushCniAddEvent(event: CniPluginAddEvent, options: CniEventClientOptions): Promise<void> {
  const body = encodeCniAddEvent(event);
  const limit = deadline(options.timeoutMs, { what: 'broker registration', parent: options.signal, clock: options.clock ?? systemClock });
  try {
    await post(body, options, limit.signal);
  } finally {
    limit.dispose();
  }
}

/** One POST, destroyed when `signal` aborts (its own deadline, or the caller's signal before it). */
async function post(body: string, options: CniEventClientOptions, signal: AbortSignal): Promise<void> {
  let answer: UnixHttpAnswer;
  try {
    answer = await postOverUnixSocket(options.socketPath, CNI_ADD_EVENT_PATH, body, signal);
  } catch (err) {
    if (isInterrupted(err)) throw new CniError('ERR_CNI_TRY_AGAIN', 'broker registration: response interrupted');
    if (options.signal?.aborted) throw abortReason(options.signal);
    const e = err as NodeJS.ErrnoException;
    const why = signal.aborted ? `no answer within ${options.timeoutMs} ms` : (e.code ?? e.message);
    throw new CniError('ERR_CNI_TRY_AGAIN', `cannot reach the node broker at ${options.socketPath}: ${why}`, {
      details: 'the node broker registers ambient pods; is it running on this node?',
    });
  }
  if (answer.status === 200) return;
  const text = answer.body.replace(/\s+/g, ' ').trim().slice(0, 300);
  if (answer.status === CNI_ADD_EVENT_RETRY_STATUS) {
    throw new CniError('ERR_CNI_TRY_AGAIN', 'node broker could not register the pod yet (HTTP 503)', { details: text });
  }
  throw new CniError('ERR_CNI_BROKER_REJECTED', `broker refused the pod registration (HTTP ${answer.status})`, { details: text });
}
