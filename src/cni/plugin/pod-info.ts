/**
 * The pod fields the plugin's decisions read (the ambient selectors: labels, annotations,
 * hostNetwork; the sidecar rules, sidecar-redirect.ts: annotations, the inject label, and each
 * container's name, env values, args and runAsUser/runAsGroup), decoded from a Pod object in the
 * API's shape: the API server's GET (kube-client.ts) and the node broker's `POST /v1/sidecar-pod`
 * (src/protocol/cni-sidecar-pod.ts) go through this one decoder, so both give the same rules.
 * No node:http here: the broker path does not load the API client.
 */
import { isObject } from '../../protocol/cni-event.js';

export interface ContainerInfo {
  readonly name: string;
  readonly env: ReadonlyArray<{ readonly name: string; readonly value?: string }>;
  readonly args: readonly string[];
  readonly runAsUser: number | undefined;
  readonly runAsGroup: number | undefined;
}

export interface PodInfo {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly hostNetwork: boolean;
  readonly containers: readonly ContainerInfo[];
  readonly initContainers: readonly ContainerInfo[];
}

export function stringMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (isObject(v)) for (const [k, s] of Object.entries(v)) if (typeof s === 'string') out[k] = s;
  return out;
}

function optInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) ? v : undefined;
}

function container(c: unknown): ContainerInfo {
  const o = isObject(c) ? c : {};
  const sc = isObject(o.securityContext) ? o.securityContext : {};
  return {
    name: typeof o.name === 'string' ? o.name : '',
    env: (Array.isArray(o.env) ? o.env : [])
      .filter(isObject)
      .filter((e) => typeof e.name === 'string')
      .map((e) => ({ name: e.name as string, ...(typeof e.value === 'string' ? { value: e.value } : {}) })),
    args: (Array.isArray(o.args) ? o.args : []).filter((a): a is string => typeof a === 'string'),
    runAsUser: optInt(sc.runAsUser),
    runAsGroup: optInt(sc.runAsGroup),
  };
}

/** Decodes a Pod object as the API returns it (tolerant of absent optional fields). */
export function podFromObject(obj: unknown): PodInfo {
  const o = isObject(obj) ? obj : {};
  const meta = isObject(o.metadata) ? o.metadata : {};
  const spec = isObject(o.spec) ? o.spec : {};
  return {
    name: typeof meta.name === 'string' ? meta.name : '',
    namespace: typeof meta.namespace === 'string' ? meta.namespace : '',
    uid: typeof meta.uid === 'string' ? meta.uid : '',
    labels: stringMap(meta.labels),
    annotations: stringMap(meta.annotations),
    hostNetwork: spec.hostNetwork === true,
    containers: (Array.isArray(spec.containers) ? spec.containers : []).map(container),
    initContainers: (Array.isArray(spec.initContainers) ? spec.initContainers : []).map(container),
  };
}

