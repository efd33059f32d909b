/**
 * The one-round-trip ambient ADD (src/protocol/cni-ambient-add.ts): asks the node broker, over its
 * registration socket, whether the pod is ambient under the plugin's selectors and registers it if
 * so. Never fails the ADD: no socket, no answer within `timeoutMs`, another status or a body that
 * is not one of the protocol's answers all come back as `{ known: false, why }`, and the plugin
 * then reads the pod from the API server as it always did. Only the ADD's own budget (`signal`)
 * ends it with its reason.
 */
import type { Clock } from '../../core/clock.js';
import { abortReason, deadline } from '../../core/deadline.js';
import { AMBIENT_ADD_PATH, decodeAmbientAddAnswer, type AmbientAddAnswer, type AmbientAddRequest } from '../../protocol/cni-ambient-add.js';
import { encodeCniAddEvent } from '../../protocol/cni-event.js';
import { postOverUnixSocket, type UnixHttpAnswer } from './unix-http.js';

/** How long the broker's answer may take (at most `cniEventTimeoutMs`) before the API path is taken instead. */
export const BROKER_ASK_TIMEOUT_MS = 500;

export interface BrokerAmbientOptions {
  /** The registration socket (the plugin's `cni_event_socket`). */
  readonly cniEventSocketPath: string;
  readonly cniEventTimeoutMs: number;
  /** The ADD's budget. */
  readonly signal: AbortSignal;
  readonly clock: Clock;
}

export type BrokerAmbientOutcome = Exclude<AmbientAddAnswer, { known: false }> | { readonly known: false; readonly why: string };

export function encodeAmbientAddRequest(request: AmbientAddRequest): string {
  return `{"event":${encodeCniAddEvent(request.event)},"podUid":${JSON.stringify(request.podUid)},"selectors":${JSON.stringify(request.selectors)}}`;
}

export async function askBrokerAmbientAdd(request: AmbientAddRequest, options: BrokerAmbientOptions): Promise<BrokerAmbientOutcome> {
  const asked = await postToBroker(AMBIENT_ADD_PATH, encodeAmbientAddRequest(request), 'broker ambient check', options);
  if (!asked.answer) return { known: false, why: asked.why };
  if (asked.answer.status !== 200) return { known: false, why: `HTTP ${asked.answer.status}` };
  const decoded = decodeAmbientAddAnswer(asked.answer.body);
  if (decoded === undefined) return { known: false, why: 'answer is not one the protocol defines' };
  return decoded.known ? decoded : { known: false, why: 'the broker has not seen the pod yet' };
}

/**
 * One POST to the broker within BROKER_ASK_TIMEOUT_MS (and `cniEventTimeoutMs`): its answer, or
 * why there is none (socket error, no answer in time); throws only when the ADD's budget ends.
 */
export async function postToBroker(path: string, body: string, what: string, options: BrokerAmbientOptions): Promise<{ readonly answer: UnixHttpAnswer } | { readonly answer?: undefined; readonly why: string }> {
  const timeoutMs = Math.min(BROKER_ASK_TIMEOUT_MS, options.cniEventTimeoutMs);
  const limit = deadline(timeoutMs, { what, parent: options.signal, clock: options.clock });
  try {
    return { answer: await postOverUnixSocket(options.cniEventSocketPath, path, body, limit.signal) };
  } catch (err) {
    if (options.signal.aborted) throw abortReason(options.signal);
    if (limit.signal.aborted) return { why: `no answer within ${timeoutMs} ms` };
    const e = err as NodeJS.ErrnoException;
    return { why: e.code ?? e.message };
  } finally {
    limit.dispose();
  }
}
