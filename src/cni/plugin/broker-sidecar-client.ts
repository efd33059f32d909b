/**
 * The sidecar ADD's pod read from the node broker (src/protocol/cni-sidecar-pod.ts): one round trip
 * over the registration socket instead of a TLS connection and a GET to the API server. Never fails
 * the ADD: no socket, no answer within BROKER_ASK_TIMEOUT_MS, a 404 (not watched, or another UID),
 * another status or a body that is not a JSON object all come back as `{ why }`, and the plugin then
 * reads the pod from the API server as it always did. Only the ADD's own budget (`signal`) ends it
 * with its reason. The answer goes through the API path's decoder (pod-info.ts).
 */
import { isObject } from '../../protocol/cni-event.js';
import { SIDECAR_POD_PATH, encodeSidecarPodRequest, type SidecarPodRequest } from '../../protocol/cni-sidecar-pod.js';
import { postToBroker, type BrokerAmbientOptions } from './broker-ambient-client.js';
import { podFromObject, type PodInfo } from './pod-info.js';

export type BrokerSidecarOutcome = { readonly pod: PodInfo } | { readonly pod?: undefined; readonly why: string };

export async function askBrokerSidecarPod(request: SidecarPodRequest, options: BrokerAmbientOptions): Promise<BrokerSidecarOutcome> {
  const asked = await postToBroker(SIDECAR_POD_PATH, encodeSidecarPodRequest(request), 'broker sidecar pod read', options);
  if (!asked.answer) return { why: asked.why };
  if (asked.answer.status !== 200) return { why: `HTTP ${asked.answer.status}` };
  let raw: unknown;
  try {
    raw = JSON.parse(asked.answer.body);
  } catch {
    return { why: 'answer is not JSON' };
  }
  const pod = isObject(raw) ? podFromObject(raw) : undefined;
  // Belt and braces: the broker matched the UID; a pod of another UID or name is not this one.
  if (!pod || pod.uid !== request.uid || pod.name !== request.name || pod.namespace !== request.namespace) return { why: 'answer is not the pod asked for' };
  return { pod };
}
