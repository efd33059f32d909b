/**
 * certbroker's one-round-trip ADD for ambient pods: the plugin asks the node broker, over the same
 * Unix socket and with the same protection as `POST /cmdadd` (src/protocol/cni-event.ts), "is this
 * pod ambient under these enablement selectors? if so, register it". The broker answers from its
 * watch of this node's pods and of the namespaces, without calling the API server:
 *
 *   POST /v1/ambient-add
 *   {"event":{...CNIPluginAddEvent...},"podUid":"<K8S_POD_UID or ''>","selectors":[...EnablementSelector...]}
 *
 *   200 {"known":false}                                  the broker has not seen the pod (or its namespace) yet
 *   200 {"known":true,"ambient":true,"registered":true}  ambient, registered (the certificate fetch is started)
 *   200 {"known":true,"ambient":true,"registered":false,"reason":"host-network"}  ambient, deliberately ignored
 *   200 {"known":true,"ambient":false}                   not ambient (the plugin goes on with the sidecar path)
 *
 * Anything else (no socket, another status, a body that does not decode as one of these) means
 * "ask the API server": the plugin keeps its original path. This file imports only cni-event.ts.
 */
import { isObject, parseJsonObject, type CniPluginAddEvent } from './cni-event.js';

export const AMBIENT_ADD_PATH = '/v1/ambient-add';
export const AMBIENT_ADD_METHOD = 'POST';

export interface AmbientAddRequest {
  readonly event: CniPluginAddEvent;
  /** K8S_POD_UID from CNI_ARGS ('' when the runtime gave none): a cached pod of another UID is not this one. */
  readonly podUid: string;
  /** The plugin's enablement selectors, as JSON (src/cni/plugin/enablement.ts decodes them). */
  readonly selectors: unknown;
}

export type AmbientAddAnswer =
  | { readonly known: false }
  | { readonly known: true; readonly ambient: false }
  | { readonly known: true; readonly ambient: true; readonly registered: boolean; readonly reason?: string };

/** The answer body, or undefined when it is not exactly one of the documented shapes. */
export function decodeAmbientAddAnswer(body: string): AmbientAddAnswer | undefined {
  const raw = parseJsonObject(body);
  if (typeof raw === 'string') return undefined;
  if (raw.known === false) return { known: false };
  if (raw.known !== true) return undefined;
  if (raw.ambient === false) return { known: true, ambient: false };
  if (raw.ambient !== true || typeof raw.registered !== 'boolean') return undefined;
  if (raw.reason !== undefined && typeof raw.reason !== 'string') return undefined;
  return { known: true, ambient: true, registered: raw.registered, ...(typeof raw.reason === 'string' ? { reason: raw.reason } : {}) };
}

/** The request body (the broker decodes `event` with decodeCniAddEvent's rules). */
export function decodeAmbientAddRequest(body: string): { readonly ok: true; readonly eventJson: string; readonly podUid: string; readonly selectors: unknown } | { readonly ok: false; readonly problem: string } {
  const raw = parseJsonObject(body);
  if (typeof raw === 'string') return { ok: false, problem: raw };
  if (!isObject(raw.event)) return { ok: false, problem: 'event is missing or not an object' };
  const podUid = raw.podUid ?? '';
  if (typeof podUid !== 'string') return { ok: false, problem: 'podUid must be a string' };
  return { ok: true, eventJson: JSON.stringify(raw.event), podUid, selectors: raw.selectors ?? null };
}
