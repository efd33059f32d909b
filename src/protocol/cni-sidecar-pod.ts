/**
 * certbroker's sidecar-pod read: the plugin asks the node broker, over the registration socket
 * (same protection as `POST /cmdadd`, src/protocol/cni-event.ts), for the pod fields the sidecar
 * rules read, instead of a TLS connection and a GET to the API server. The broker answers from its
 * watch of this node's pods:
 *
 *   POST /v1/sidecar-pod
 *   {"namespace":"<ns>","name":"<pod>","uid":"<K8S_POD_UID>"}
 *
 *   200 {"metadata":{...},"spec":{...}}   the pod, cut to `sidecarPodFields` (a Pod object's shape)
 *   404                                   not watched (not seen yet, not on this node), or another UID
 *
 * The uid is required: a cached pod of the same name but another UID (an earlier pod) is never
 * answered. Anything but a 200 with a JSON object means "ask the API server". The answer is a Pod
 * object's shape so that the plugin decodes it with the decoder of the API path
 * (src/cni/plugin/pod-info.ts). This file imports only cni-event.ts.
 */
import { isObject, parseJsonObject } from './cni-event.js';

export const SIDECAR_POD_PATH = '/v1/sidecar-pod';
export const SIDECAR_POD_METHOD = 'POST';

export interface SidecarPodRequest {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

export function encodeSidecarPodRequest(r: SidecarPodRequest): string {
  return JSON.stringify({ namespace: r.namespace, name: r.name, uid: r.uid });
}

export function decodeSidecarPodRequest(body: string): { readonly ok: true; readonly request: SidecarPodRequest } | { readonly ok: false; readonly problem: string } {
  const raw = parseJsonObject(body);
  if (typeof raw === 'string') return { ok: false, problem: raw };
  for (const k of ['namespace', 'name', 'uid'] as const) {
    if (typeof raw[k] !== 'string' || raw[k] === '') return { ok: false, problem: `${k} must be a non-empty string` };
  }
  return { ok: true, request: { namespace: raw.namespace as string, name: raw.name as string, uid: raw.uid as string } };
}

type Obj = Record<string, unknown>;
const objectOr = (v: unknown): Obj => (isObject(v) ? v : {});

/** One container, cut to what the sidecar rules read: name, env names/values, args, runAsUser/runAsGroup. */
function containerFields(c: unknown): Obj {
  const o = objectOr(c);
  const sc = objectOr(o.securityContext);
  return {
    name: o.name,
    env: Array.isArray(o.env) ? o.env.map((e) => (isObject(e) ? { name: e.name, value: e.value } : e)) : undefined,
    args: o.args,
    securityContext: { runAsUser: sc.runAsUser, runAsGroup: sc.runAsGroup },
  };
}

/**
 * A Pod object (API JSON or @kubernetes/client-node's V1Pod, whose fields read here have the same
 * names) cut to the fields the plugin's sidecar decision reads, each copied as it is (the plugin's
 * decoder does the checking): metadata name/namespace/uid/labels/annotations, spec hostNetwork and
 * the containers' and init containers' fields above. Undefined fields vanish in JSON.
 */
export function sidecarPodFields(pod: unknown): Obj {
  const o = objectOr(pod);
  const meta = objectOr(o.metadata);
  const spec = objectOr(o.spec);
  const containers = (v: unknown) => (Array.isArray(v) ? v.map(containerFields) : undefined);
  return {
    metadata: { name: meta.name, namespace: meta.namespace, uid: meta.uid, labels: meta.labels, annotations: meta.annotations },
    spec: { hostNetwork: spec.hostNetwork, containers: containers(spec.containers), initContainers: containers(spec.initContainers) },
  };
}
